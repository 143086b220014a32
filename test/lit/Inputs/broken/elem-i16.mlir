// Element type i16 is not one of pt2's dtypes.
func.func @f(%x: tensor<4xi16>) -> tensor<4xi16> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xi16>}}
  %0 = "pt2.neg"(%x) : (tensor<4xi16>) -> tensor<4xi16>
  return %0 : tensor<4xi16>
}
