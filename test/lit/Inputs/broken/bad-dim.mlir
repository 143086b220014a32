func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expect@+1 {{'pt2.cumsum' dim=5 out of range for a rank-2 tensor}}
  %0 = "pt2.cumsum"(%x) {dim = 5 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
