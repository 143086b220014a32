// A stray character where an operation should start.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expect@+1 {{@ identifier expected to start with letter}}
  %0 = @@ "pt2.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
