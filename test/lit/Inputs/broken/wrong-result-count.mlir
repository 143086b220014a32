// pt2.sort has two results (values, indices); one is declared.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.sort'}}
  %0 = "pt2.sort"(%x) {dim = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
