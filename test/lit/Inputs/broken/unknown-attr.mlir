// A misspelt attribute must not pass silently.
func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.sum' has unknown attribute 'dim'}}
  %0 = "pt2.sum"(%x) {dim = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
