// Element type i4 is not one of pt2's dtypes.
func.func @f(%x: tensor<4xi4>) -> tensor<4xi4> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xi4>}}
  %0 = "pt2.neg"(%x) : (tensor<4xi4>) -> tensor<4xi4>
  return %0 : tensor<4xi4>
}
