func.func @f(%x: tensor<3x4xf32>, %y: tensor<4xf32>) -> tensor<4x4xf32> {
  // expect@+1 {{'pt2.cat'}}
  %0 = "pt2.cat"(%x, %y) {dim = 0 : i64} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
