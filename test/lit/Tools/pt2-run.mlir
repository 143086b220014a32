// RUN: rm -rf %t && mkdir -p %t
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --print | FileCheck %s --check-prefix=COLD
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s | FileCheck %s --check-prefix=WARM
// COLD: compiled in {{.*}} s
// COLD-NOT: from cache
// COLD: output 0: shape [2, 3] dtype float32 sum 2 abs_sum 2
// WARM: (from cache)
// WARM: output 0: shape [2, 3] dtype float32 sum 2 abs_sum 2

// Rows of a softmax sum to one, whatever the random input.
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
