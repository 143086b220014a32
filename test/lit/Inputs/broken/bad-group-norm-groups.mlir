func.func @f(%x: tensor<2x6x4xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<2x6x4xf32> {
  // expect@+1 {{'pt2.group_norm'}}
  %0 = "pt2.group_norm"(%x, %w, %b) {groups = 4 : i64} : (tensor<2x6x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x4xf32>
  return %0 : tensor<2x6x4xf32>
}
