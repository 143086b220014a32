func.func @f(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  // expect@+1 {{'pt2.expand'}}
  %0 = "pt2.expand"(%x) {shape = array<i64: 3, 5>} : (tensor<3x4xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}
