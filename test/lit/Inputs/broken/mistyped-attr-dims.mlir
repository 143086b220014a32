func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.sum' attribute 'dims' must be an i64 array}}
  %0 = "pt2.sum"(%x) {dims = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
