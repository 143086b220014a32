func.func @f(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expect@+1 {{'pt2.permute'}}
  %0 = "pt2.permute"(%x) {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
