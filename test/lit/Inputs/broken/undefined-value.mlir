// Uses a value that is never defined.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{use of undeclared SSA value name}}
  %0 = "pt2.neg"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
