func.func @f(%x: tensor<5x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expect@+1 {{'pt2.index_select'}}
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<5x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
