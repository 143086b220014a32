// pt2-opt: ok
// pt2-run: --func missing
// expect@1 {{no function @missing in the module}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
