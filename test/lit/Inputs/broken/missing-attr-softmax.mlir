func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expect@+1 {{'pt2.softmax' needs attribute 'dim'}}
  %0 = "pt2.softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
