// Element type ui16 is not one of pt2's dtypes.
func.func @f(%x: tensor<4xui16>) -> tensor<4xui16> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xui16>}}
  %0 = "pt2.neg"(%x) : (tensor<4xui16>) -> tensor<4xui16>
  return %0 : tensor<4xui16>
}
