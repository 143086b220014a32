// An op of a dialect nobody registered.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'mystery.op'}}
  %0 = "mystery.op"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
