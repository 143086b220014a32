func.func @f() -> tensor<2x3xf32> {
  // expect@+1 {{'pt2.full' needs attribute 'value'}}
  %0 = "pt2.full"() {shape = array<i64: 2, 3>, dtype = f32} : () -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
