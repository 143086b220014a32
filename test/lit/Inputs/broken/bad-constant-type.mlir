func.func @f() -> tensor<4xf32> {
  // expect@+1 {{'pt2.constant'}}
  %0 = "pt2.constant"() {value = dense<1> : tensor<4xi32>} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
