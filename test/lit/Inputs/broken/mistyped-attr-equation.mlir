func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expect@+1 {{'pt2.einsum' attribute 'equation' must be a string}}
  %0 = "pt2.einsum"(%a, %b) {equation = 3 : i64} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
