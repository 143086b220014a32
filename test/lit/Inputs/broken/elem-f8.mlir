// Element type f8E4M3FN is not one of pt2's dtypes.
func.func @f(%x: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xf8E4M3FN>}}
  %0 = "pt2.neg"(%x) : (tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}
