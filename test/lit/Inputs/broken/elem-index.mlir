// Element type index is not one of pt2's dtypes.
func.func @f(%x: tensor<4xindex>) -> tensor<4xindex> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xindex>}}
  %0 = "pt2.neg"(%x) : (tensor<4xindex>) -> tensor<4xindex>
  return %0 : tensor<4xindex>
}
