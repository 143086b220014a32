func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expect@+1 {{'pt2.slice'}}
  %0 = "pt2.slice"(%x) {dim = 0 : i64, start = 0 : i64, end = 8 : i64, step = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
