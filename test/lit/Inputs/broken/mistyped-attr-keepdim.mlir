func.func @f(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  // expect@+1 {{'pt2.argmax' attribute 'keepdim' must be a bool}}
  %0 = "pt2.argmax"(%x) {dim = 1 : i64, keepdim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}
