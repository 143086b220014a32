// Element type ui8 is not one of pt2's dtypes.
func.func @f(%x: tensor<4xui8>) -> tensor<4xui8> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xui8>}}
  %0 = "pt2.neg"(%x) : (tensor<4xui8>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}
