func.func @f(%x: tensor<4x8xf32>) -> tensor<5x6xf32> {
  // expect@+1 {{'pt2.reshape'}}
  %0 = "pt2.reshape"(%x) {shape = array<i64: 5, 6>} : (tensor<4x8xf32>) -> tensor<5x6xf32>
  return %0 : tensor<5x6xf32>
}
