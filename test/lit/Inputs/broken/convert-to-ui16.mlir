// pt2 has no unsigned element type but uint8 (ui8).
func.func @f(%x: tensor<4xf32>) -> tensor<4xui16> {
  // expect@+1 {{'pt2.convert' attribute 'dtype' must be an element type}}
  %0 = "pt2.convert"(%x) {dtype = ui16} : (tensor<4xf32>) -> tensor<4xui16>
  return %0 : tensor<4xui16>
}
