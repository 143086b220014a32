// An op the catalog does not have.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.frobnicate'}}
  %0 = "pt2.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
