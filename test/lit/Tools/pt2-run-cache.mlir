// The kernel cache: a second run loads the kernel; an entry whose .so was
// damaged, or whose .meta vouches for another key, is recompiled, never loaded.
// Oracle: x = [1, 2, 3, 4] (sum 10), so @double sums to 20 and @triple to 30.
// RUN: rm -rf %t && mkdir %t
// RUN: python3 %S/../Inputs/npy_io.py write %t x float32 4 1 2 3 4
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func double --input %t/x.npy | FileCheck %s --check-prefixes=DOUBLE,COLD
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func double --input %t/x.npy | FileCheck %s --check-prefixes=DOUBLE,WARM
// RUN: python3 %S/../Inputs/cache_entries.py list %t/cache > %t/double.key
// A damaged shared object fails its hash check: recompiled, and the entry repaired.
// RUN: python3 %S/../Inputs/cache_entries.py corrupt-so %t/cache %t/double.key
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func double --input %t/x.npy | FileCheck %s --check-prefixes=DOUBLE,COLD
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func double --input %t/x.npy | FileCheck %s --check-prefixes=DOUBLE,WARM
// A second kernel; then @double's entry becomes a copy of @triple's (a valid
// .so whose .meta names @triple's key): loading it would compute x * 3.
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func triple --input %t/x.npy | FileCheck %s --check-prefixes=TRIPLE,COLD
// RUN: python3 %S/../Inputs/cache_entries.py alias %t/cache %t/double.key
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func double --input %t/x.npy | FileCheck %s --check-prefixes=DOUBLE,COLD
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func double --input %t/x.npy | FileCheck %s --check-prefixes=DOUBLE,WARM
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --func triple --input %t/x.npy | FileCheck %s --check-prefixes=TRIPLE,WARM

// COLD: compiled in {{[0-9.]+}} s{{$}}
// WARM: compiled in {{[0-9.]+}} s (from cache)
// DOUBLE: output 0: shape [4] dtype float32 sum 20 abs_sum 20
// TRIPLE: output 0: shape [4] dtype float32 sum 30 abs_sum 30
func.func @double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @triple(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "pt2.add"(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
