// Element type complex<f32> is not one of pt2's dtypes.
func.func @f(%x: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4xcomplex<f32>>}}
  %0 = "pt2.neg"(%x) : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}
