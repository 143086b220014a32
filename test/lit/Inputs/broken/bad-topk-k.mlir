func.func @f(%x: tensor<4xf32>) -> (tensor<9xf32>, tensor<9xi64>) {
  // expect@+1 {{'pt2.topk'}}
  %0:2 = "pt2.topk"(%x) {k = 9 : i64} : (tensor<4xf32>) -> (tensor<9xf32>, tensor<9xi64>)
  return %0#0, %0#1 : tensor<9xf32>, tensor<9xi64>
}
