// pt2-opt: ok
// A declaration has no body to compile (reported at the module, line 1).
// expect@1 {{no function to compile}}
func.func private @f(%x: tensor<4xf32>) -> tensor<4xf32>
