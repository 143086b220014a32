func.func @f(%x: tensor<2x3x4xf32>) -> tensor<3x2xf32> {
  // expect@+1 {{'pt2.permute'}}
  %0 = "pt2.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
