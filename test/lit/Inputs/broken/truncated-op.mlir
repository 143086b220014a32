// Cut off in the middle of an operation.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.neg"(%x) : (tensor<4xf32>) -> tens