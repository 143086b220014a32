// pt2.add takes two operands.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.add'}}
  %0 = "pt2.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
