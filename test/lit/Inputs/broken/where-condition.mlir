func.func @f(%c: tensor<4xf32>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.where' condition (operand 0) must be i1}}
  %0 = "pt2.where"(%c, %x, %y) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
