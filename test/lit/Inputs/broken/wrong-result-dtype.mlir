// Comparisons give i1.
func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.lt' result 0 has type tensor<4xf32>, but its operands and attributes give tensor<4xi1>}}
  %0 = "pt2.lt"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
