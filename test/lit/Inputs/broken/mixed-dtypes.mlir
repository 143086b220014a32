func.func @f(%x: tensor<4xf32>, %y: tensor<4xf64>) -> tensor<4xf64> {
  // expect@+1 {{'pt2.sub' operands must have the same element type}}
  %0 = "pt2.sub"(%x, %y) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
