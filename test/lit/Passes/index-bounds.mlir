// RUN: pt2-opt %s --split-input-file --pt2-lower-non-contractions-device-checks | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-lower | FileCheck %s --check-prefix=CPU
// pt2-lower makes no check on an index tensor whose every value the ops
// producing it keep in range (passes/value_range.c): aranges and their
// views, sort and topk indices, clamps, floor divisions, remainders,
// where(i < 0, i + n, i).  Where a bound does not hold, or nothing bounds
// the index (an argument, a product), the check stays, on the GPU and on the CPU.

// A causal mask's positions: arange, reshape, expand, + 0.
// CHECK-LABEL: func.func @arange_views
// CHECK-NOT: cf.assert
// CHECK: return
// CPU-LABEL: func.func @arange_views
// CPU-NOT: pt2rt_index_error
// CPU: return
func.func @arange_views(%x: tensor<2x128xi64>) -> tensor<2x1x128x1xi64> {
  %a = "pt2.arange"() {dtype = i64, end = 2.0 : f64, start = 0.0 : f64, step = 1.0 : f64} : () -> tensor<2xi64>
  %b = "pt2.arange"() {dtype = i64, end = 128.0 : f64, start = 0.0 : f64, step = 1.0 : f64} : () -> tensor<128xi64>
  %z = "pt2.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %b0 = "pt2.add"(%b, %z) : (tensor<128xi64>, tensor<i64>) -> tensor<128xi64>
  %a1 = "pt2.reshape"(%a) {shape = array<i64: 2, 1, 1, 1>} : (tensor<2xi64>) -> tensor<2x1x1x1xi64>
  %b1 = "pt2.reshape"(%b0) {shape = array<i64: 1, 1, 128, 1>} : (tensor<128xi64>) -> tensor<1x1x128x1xi64>
  %a2 = "pt2.expand"(%a1) {shape = array<i64: 2, 1, 128, 1>} : (tensor<2x1x1x1xi64>) -> tensor<2x1x128x1xi64>
  %b2 = "pt2.expand"(%b1) {shape = array<i64: 2, 1, 128, 1>} : (tensor<1x1x128x1xi64>) -> tensor<2x1x128x1xi64>
  %r = "pt2.index"(%x, %a2, %b2) {dims = array<i64: 0, 1>} : (tensor<2x128xi64>, tensor<2x1x128x1xi64>, tensor<2x1x128x1xi64>) -> tensor<2x1x128x1xi64>
  return %r : tensor<2x1x128x1xi64>
}

// -----

// One past the end: arange(0, 9) into 8 rows keeps its check.
// CHECK-LABEL: func.func @arange_too_long
// CHECK: cf.assert %{{.*}}, "0 <= index && index < 8 && \22pt2.index_select{{.*}}"
// CPU-LABEL: func.func @arange_too_long
// CPU: call @pt2rt_index_error
func.func @arange_too_long(%x: tensor<8x4xf32>) -> tensor<9x4xf32> {
  %a = "pt2.arange"() {dtype = i64, end = 9.0 : f64, start = 0.0 : f64, step = 1.0 : f64} : () -> tensor<9xi64>
  %r = "pt2.index_select"(%x, %a) {dim = 0 : i64} : (tensor<8x4xf32>, tensor<9xi64>) -> tensor<9x4xf32>
  return %r : tensor<9x4xf32>
}

// -----

// A mixture of experts' routing: sort indices of 512 elements, floor-divided
// by 2 into 256 rows, and wrapped as x[i] wraps negatives (never, here).
// CHECK-LABEL: func.func @sort_indices
// CHECK-NOT: cf.assert
// CHECK: return
func.func @sort_indices(%k: tensor<512xi64>, %x: tensor<256x8xf32>, %w: tensor<512xf32>) -> (tensor<512x8xf32>, tensor<512xf32>) {
  %s:2 = "pt2.sort"(%k) {descending = false, dim = -1 : i64} : (tensor<512xi64>) -> (tensor<512xi64>, tensor<512xi64>)
  %two = "pt2.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %row = "pt2.floor_div"(%s#1, %two) : (tensor<512xi64>, tensor<i64>) -> tensor<512xi64>
  %g = "pt2.index"(%x, %row) {dims = array<i64: 0>} : (tensor<256x8xf32>, tensor<512xi64>) -> tensor<512x8xf32>
  %zero = "pt2.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %neg = "pt2.lt"(%s#1, %zero) : (tensor<512xi64>, tensor<i64>) -> tensor<512xi1>
  %n = "pt2.constant"() {value = dense<512> : tensor<i64>} : () -> tensor<i64>
  %up = "pt2.add"(%s#1, %n) : (tensor<512xi64>, tensor<i64>) -> tensor<512xi64>
  %wrapped = "pt2.where"(%neg, %up, %s#1) : (tensor<512xi1>, tensor<512xi64>, tensor<512xi64>) -> tensor<512xi64>
  %v = "pt2.index_select"(%w, %wrapped) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  return %g, %v : tensor<512x8xf32>, tensor<512xf32>
}

// -----

// Histogram bins: (x - 0) * 8 / (7 - 0) truncated, 8 moved to 7, outside
// [0, 7] to 0: every bin in [0, 8) though the values pass through f32.
// CHECK-LABEL: func.func @histogram_bins
// CHECK-NOT: cf.assert
// CHECK: return
func.func @histogram_bins(%t: tensor<512x2xf32>, %counts: tensor<8xi64>) -> tensor<512xi64> {
  %top:2 = "pt2.topk"(%t) {dim = -1 : i64, k = 2 : i64, largest = true} : (tensor<512x2xf32>) -> (tensor<512x2xf32>, tensor<512x2xi64>)
  %i = "pt2.reshape"(%top#1) {shape = array<i64: 1024>} : (tensor<512x2xi64>) -> tensor<1024xi64>
  %s = "pt2.slice"(%i) {dim = 0 : i64, end = 512 : i64, start = 0 : i64, step = 1 : i64} : (tensor<1024xi64>) -> tensor<512xi64>
  %f = "pt2.convert"(%s) {dtype = f32} : (tensor<512xi64>) -> tensor<512xf32>
  %lo = "pt2.full"() {dtype = f32, shape = array<i64>, value = 0.0 : f64} : () -> tensor<f32>
  %hi = "pt2.full"() {dtype = f32, shape = array<i64>, value = 7.0 : f64} : () -> tensor<f32>
  %eight = "pt2.constant"() {value = dense<8.0> : tensor<f32>} : () -> tensor<f32>
  %d = "pt2.sub"(%f, %lo) : (tensor<512xf32>, tensor<f32>) -> tensor<512xf32>
  %m = "pt2.mul"(%d, %eight) : (tensor<512xf32>, tensor<f32>) -> tensor<512xf32>
  %w = "pt2.sub"(%hi, %lo) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %q = "pt2.div"(%m, %w) : (tensor<512xf32>, tensor<f32>) -> tensor<512xf32>
  %b = "pt2.convert"(%q) {dtype = i64} : (tensor<512xf32>) -> tensor<512xi64>
  %n = "pt2.constant"() {value = dense<8> : tensor<i64>} : () -> tensor<i64>
  %over = "pt2.ge"(%b, %n) : (tensor<512xi64>, tensor<i64>) -> tensor<512xi1>
  %last = "pt2.constant"() {value = dense<7> : tensor<i64>} : () -> tensor<i64>
  %bin = "pt2.where"(%over, %last, %b) : (tensor<512xi1>, tensor<i64>, tensor<512xi64>) -> tensor<512xi64>
  %r = "pt2.gather"(%counts, %bin) {dim = 0 : i64} : (tensor<8xi64>, tensor<512xi64>) -> tensor<512xi64>
  return %r : tensor<512xi64>
}

// -----

// Without the where, the top bin (8) is out of range: checked.
// CHECK-LABEL: func.func @histogram_bins_unclamped
// CHECK: cf.assert
func.func @histogram_bins_unclamped(%s: tensor<512xi64>, %counts: tensor<8xi64>) -> tensor<512xi64> {
  %c = "pt2.clamp"(%s) {min = 0.0 : f64, max = 7.0 : f64} : (tensor<512xi64>) -> tensor<512xi64>
  %f = "pt2.convert"(%c) {dtype = f32} : (tensor<512xi64>) -> tensor<512xf32>
  %eight = "pt2.constant"() {value = dense<8.0> : tensor<f32>} : () -> tensor<f32>
  %seven = "pt2.constant"() {value = dense<7.0> : tensor<f32>} : () -> tensor<f32>
  %m = "pt2.mul"(%f, %eight) : (tensor<512xf32>, tensor<f32>) -> tensor<512xf32>
  %q = "pt2.div"(%m, %seven) : (tensor<512xf32>, tensor<f32>) -> tensor<512xf32>
  %b = "pt2.convert"(%q) {dtype = i64} : (tensor<512xf32>) -> tensor<512xi64>
  %r = "pt2.gather"(%counts, %b) {dim = 0 : i64} : (tensor<8xi64>, tensor<512xi64>) -> tensor<512xi64>
  return %r : tensor<512xi64>
}

// -----

// The inverse permutation: amax over where(eq, arange, -1) clamped at 0,
// then a remainder and a bitwise and: all in [0, 512).
// CHECK-LABEL: func.func @clamped_amax
// CHECK-NOT: cf.assert
// CHECK: return
func.func @clamped_amax(%e: tensor<512x512xi1>, %x: tensor<512xf32>, %k: tensor<512xi64>) -> (tensor<512xf32>, tensor<512xf32>, tensor<512xf32>) {
  %a = "pt2.arange"() {dtype = i64, end = 512.0 : f64, start = 0.0 : f64, step = 1.0 : f64} : () -> tensor<512xi64>
  %m1 = "pt2.constant"() {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %w = "pt2.where"(%e, %a, %m1) : (tensor<512x512xi1>, tensor<512xi64>, tensor<i64>) -> tensor<512x512xi64>
  %mx = "pt2.amax"(%w) {dims = array<i64: -1>, keepdim = false} : (tensor<512x512xi64>) -> tensor<512xi64>
  %c = "pt2.clamp"(%mx) {min = 0.0 : f64} : (tensor<512xi64>) -> tensor<512xi64>
  %r = "pt2.index_select"(%x, %c) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  %n = "pt2.constant"() {value = dense<512> : tensor<i64>} : () -> tensor<i64>
  %mod = "pt2.remainder"(%k, %n) : (tensor<512xi64>, tensor<i64>) -> tensor<512xi64>
  %r2 = "pt2.index_select"(%x, %mod) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  %mask = "pt2.constant"() {value = dense<511> : tensor<i64>} : () -> tensor<i64>
  %and = "pt2.bitwise_and"(%k, %mask) : (tensor<512xi64>, tensor<i64>) -> tensor<512xi64>
  %r3 = "pt2.index_select"(%x, %and) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  return %r, %r2, %r3 : tensor<512xf32>, tensor<512xf32>, tensor<512xf32>
}

// -----

// Not bounded: the amax without its clamp (-1), an argument's index plus
// an arange (it may wrap), a float product converted (NaN, infinity).
// CHECK-LABEL: func.func @unbounded
// CHECK-COUNT-3: cf.assert
func.func @unbounded(%e: tensor<512x512xi1>, %x: tensor<512xf32>, %k: tensor<512xi64>, %f: tensor<512xf32>) -> (tensor<512xf32>, tensor<512xf32>, tensor<512xf32>) {
  %a = "pt2.arange"() {dtype = i64, end = 512.0 : f64, start = 0.0 : f64, step = 1.0 : f64} : () -> tensor<512xi64>
  %m1 = "pt2.constant"() {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %w = "pt2.where"(%e, %a, %m1) : (tensor<512x512xi1>, tensor<512xi64>, tensor<i64>) -> tensor<512x512xi64>
  %mx = "pt2.amax"(%w) {dims = array<i64: -1>, keepdim = false} : (tensor<512x512xi64>) -> tensor<512xi64>
  %r = "pt2.index_select"(%x, %mx) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  %s = "pt2.add"(%k, %a) : (tensor<512xi64>, tensor<512xi64>) -> tensor<512xi64>
  %r2 = "pt2.index_select"(%x, %s) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  %p = "pt2.mul"(%f, %f) : (tensor<512xf32>, tensor<512xf32>) -> tensor<512xf32>
  %i = "pt2.convert"(%p) {dtype = i64} : (tensor<512xf32>) -> tensor<512xi64>
  %r3 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<512xf32>, tensor<512xi64>) -> tensor<512xf32>
  return %r, %r2, %r3 : tensor<512xf32>, tensor<512xf32>, tensor<512xf32>
}

// -----

// T5's relative position buckets: |i - j| below 8 as it is, else 8 + the
// log of it scaled to [0, 8) and capped at 15, plus 16 when j > i: every
// bucket in [0, 32) (log's bounds widened for its approximations).
// CHECK-LABEL: func.func @t5_buckets
// CHECK-NOT: cf.assert
// CHECK: return
func.func @t5_buckets(%table: tensor<32x8xf32>) -> tensor<16384x8xf32> {
  %a = "pt2.arange"() {dtype = i64, end = 128.0 : f64, start = 0.0 : f64, step = 1.0 : f64} : () -> tensor<128xi64>
  %i = "pt2.reshape"(%a) {shape = array<i64: 128, 1>} : (tensor<128xi64>) -> tensor<128x1xi64>
  %j = "pt2.reshape"(%a) {shape = array<i64: 1, 128>} : (tensor<128xi64>) -> tensor<1x128xi64>
  %rel = "pt2.sub"(%j, %i) : (tensor<1x128xi64>, tensor<128x1xi64>) -> tensor<128x128xi64>
  %z = "pt2.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %pos = "pt2.gt"(%rel, %z) : (tensor<128x128xi64>, tensor<i64>) -> tensor<128x128xi1>
  %posi = "pt2.convert"(%pos) {dtype = i64} : (tensor<128x128xi1>) -> tensor<128x128xi64>
  %c16 = "pt2.constant"() {value = dense<16> : tensor<i64>} : () -> tensor<i64>
  %half = "pt2.mul"(%posi, %c16) : (tensor<128x128xi64>, tensor<i64>) -> tensor<128x128xi64>
  %abs = "pt2.abs"(%rel) : (tensor<128x128xi64>) -> tensor<128x128xi64>
  %c8 = "pt2.constant"() {value = dense<8> : tensor<i64>} : () -> tensor<i64>
  %small = "pt2.lt"(%abs, %c8) : (tensor<128x128xi64>, tensor<i64>) -> tensor<128x128xi1>
  %f = "pt2.convert"(%abs) {dtype = f32} : (tensor<128x128xi64>) -> tensor<128x128xf32>
  %f8 = "pt2.constant"() {value = dense<8.0> : tensor<f32>} : () -> tensor<f32>
  %q = "pt2.div"(%f, %f8) : (tensor<128x128xf32>, tensor<f32>) -> tensor<128x128xf32>
  %l = "pt2.log"(%q) : (tensor<128x128xf32>) -> tensor<128x128xf32>
  %ln16 = "pt2.constant"() {value = dense<2.77258873> : tensor<f32>} : () -> tensor<f32>
  %s = "pt2.div"(%l, %ln16) : (tensor<128x128xf32>, tensor<f32>) -> tensor<128x128xf32>
  %s8 = "pt2.mul"(%s, %f8) : (tensor<128x128xf32>, tensor<f32>) -> tensor<128x128xf32>
  %si = "pt2.convert"(%s8) {dtype = i64} : (tensor<128x128xf32>) -> tensor<128x128xi64>
  %large = "pt2.add"(%si, %c8) : (tensor<128x128xi64>, tensor<i64>) -> tensor<128x128xi64>
  %c15 = "pt2.full"() {dtype = i64, shape = array<i64: 128, 128>, value = 15.0 : f64} : () -> tensor<128x128xi64>
  %capped = "pt2.minimum"(%large, %c15) : (tensor<128x128xi64>, tensor<128x128xi64>) -> tensor<128x128xi64>
  %b = "pt2.where"(%small, %abs, %capped) : (tensor<128x128xi1>, tensor<128x128xi64>, tensor<128x128xi64>) -> tensor<128x128xi64>
  %bucket = "pt2.add"(%half, %b) : (tensor<128x128xi64>, tensor<128x128xi64>) -> tensor<128x128xi64>
  %flat = "pt2.reshape"(%bucket) {shape = array<i64: 16384>} : (tensor<128x128xi64>) -> tensor<16384xi64>
  %r = "pt2.index_select"(%table, %flat) {dim = 0 : i64} : (tensor<32x8xf32>, tensor<16384xi64>) -> tensor<16384x8xf32>
  return %r : tensor<16384x8xf32>
}
