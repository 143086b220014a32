func.func @f(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expect@+1 {{'pt2.exp': expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "pt2.exp"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
