func.func @f(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expect@+1 {{'pt2.convert' attribute 'dtype' must be an element type}}
  %0 = "pt2.convert"(%x) {dtype = "f16"} : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}
