// pt2-opt: ok
// Valid IR, but pt2-run cannot compile a function that returns nothing.
// expect@+1 {{returns nothing}}
func.func @f(%x: tensor<4xf32>) {
  %0 = "pt2.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}
