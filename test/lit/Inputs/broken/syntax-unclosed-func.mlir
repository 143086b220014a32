// The function body is never closed.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
