func.func @f(%x: tensor<2x6xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<2x6xf32> {
  // expect@+1 {{'pt2.layer_norm'}}
  %0 = "pt2.layer_norm"(%x, %w, %b) {normalized_ndim = 3 : i64} : (tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}
