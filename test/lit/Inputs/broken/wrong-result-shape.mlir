// The broadcast of [4, 1] and [3] is [4, 3], not [4, 4].
func.func @f(%x: tensor<4x1xf32>, %y: tensor<3xf32>) -> tensor<4x4xf32> {
  // expect@+1 {{'pt2.add' result 0 has type tensor<4x4xf32>, but its operands and attributes give tensor<4x3xf32>}}
  %0 = "pt2.add"(%x, %y) : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
