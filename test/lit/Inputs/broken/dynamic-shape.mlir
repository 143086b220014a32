func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expect@+1 {{'pt2.exp' operand 0 has type tensor<?x4xf32>; pt2 needs a static-shaped tensor}}
  %0 = "pt2.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
