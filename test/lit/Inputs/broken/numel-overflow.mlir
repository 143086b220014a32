// 2^62 x 4 elements: the byte size overflows int64.
func.func @f(%x: tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32> {
  // expect@+1 {{'pt2.neg' operand 0 has type tensor<4611686018427387904x4xf32>}}
  %0 = "pt2.neg"(%x) : (tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32>
  return %0 : tensor<4611686018427387904x4xf32>
}
