// pt2 ops have no regions.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.neg'}}
  %0 = "pt2.neg"(%x) ({
    "func.return"() : () -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
