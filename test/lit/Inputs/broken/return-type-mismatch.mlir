func.func @f(%x: tensor<4xf32>) -> tensor<4xf16> {
  %0 = "pt2.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  // expect@+1 {{'func.return'}}
  return %0 : tensor<4xf32>
}
