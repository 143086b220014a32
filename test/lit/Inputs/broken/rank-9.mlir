// pt2 supports rank <= 8.
func.func @f(%x: tensor<1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x2xf32> {
  // expect@+1 {{'pt2.relu' operand 0 has type tensor<1x1x1x1x1x1x1x1x2xf32>}}
  %0 = "pt2.relu"(%x) : (tensor<1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x2xf32>
  return %0 : tensor<1x1x1x1x1x1x1x1x2xf32>
}
