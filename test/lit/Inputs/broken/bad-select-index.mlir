func.func @f(%x: tensor<3x4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.select'}}
  %0 = "pt2.select"(%x) {dim = 0 : i64, index = 7 : i64} : (tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
