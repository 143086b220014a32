// pt2 has no unsigned element types.
func.func @f(%x: tensor<4xf32>) -> tensor<4xui8> {
  // expect@+1 {{'pt2.convert' attribute 'dtype' must be an element type}}
  %0 = "pt2.convert"(%x) {dtype = ui8} : (tensor<4xf32>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}
