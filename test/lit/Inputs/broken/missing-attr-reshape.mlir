func.func @f(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  // expect@+1 {{'pt2.reshape' needs attribute 'shape'}}
  %0 = "pt2.reshape"(%x) : (tensor<4x8xf32>) -> tensor<32xf32>
  return %0 : tensor<32xf32>
}
