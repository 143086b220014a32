func.func @f(%x: memref<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{'pt2.add'}}
  %0 = "pt2.add"(%x, %y) : (memref<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
