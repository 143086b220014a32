func.func @f(%x: tensor<3x4xf32>) -> tensor<3x6xf32> {
  // expect@+1 {{'pt2.pad'}}
  %0 = "pt2.pad"(%x) {pads = array<i64: 1, 1, 0>} : (tensor<3x4xf32>) -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}
