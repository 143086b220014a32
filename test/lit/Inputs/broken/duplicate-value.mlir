func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  // expect@+1 {{redefinition of SSA value '%0'}}
  %0 = "pt2.abs"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
