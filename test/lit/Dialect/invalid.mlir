// RUN: pt2-opt %s --split-input-file --verify-diagnostics
// Ill-typed pt2 IR is rejected with the op's name and what is wrong.

func.func @bad_broadcast(%x: tensor<4x8xf32>, %y: tensor<3xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'pt2.add' operand shapes [4, 8] and [3] do not broadcast}}
  %0 = "pt2.add"(%x, %y) : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @wrong_result(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'pt2.sum' result 0 has type tensor<4xf32>, but its operands and attributes give tensor<4x1xf32>}}
  %0 = "pt2.sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @mixed_dtypes(%x: tensor<4xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error@+1 {{'pt2.mul' operands must have the same element type (got f32 and i32); insert pt2.convert}}
  %0 = "pt2.mul"(%x, %y) : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @missing_attr(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'pt2.softmax' needs attribute 'dim'}}
  %0 = "pt2.softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @unknown_attr(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'pt2.softmax' has unknown attribute 'axis'}}
  %0 = "pt2.softmax"(%x) {dim = 1 : i64, axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dim_out_of_range(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'pt2.softmax' dim=2 out of range for a rank-2 tensor}}
  %0 = "pt2.softmax"(%x) {dim = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @bad_dtype(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error@+1 {{'pt2.gelu' does not accept element type i32 (operand 0)}}
  %0 = "pt2.gelu"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @unsupported_element(%x: tensor<4xui16>) -> tensor<4xui16> {
  // expected-error@+1 {{'pt2.neg' operand 0 has type tensor<4xui16>; pt2 needs a static-shaped tensor}}
  %0 = "pt2.neg"(%x) : (tensor<4xui16>) -> tensor<4xui16>
  return %0 : tensor<4xui16>
}

// -----

func.func @dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{'pt2.neg' operand 0 has type tensor<?xf32>; pt2 needs a static-shaped tensor}}
  %0 = "pt2.neg"(%x) : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @matmul_k(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) -> tensor<3x6xf32> {
  // expected-error@+1 {{'pt2.matmul' contraction sizes differ: 4 vs 5}}
  %0 = "pt2.matmul"(%a, %b) : (tensor<3x4xf32>, tensor<5x6xf32>) -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{unregistered operation 'pt2.frobnicate'}}
  %0 = "pt2.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @not_a_tensor(%x: f32) -> f32 {
  // expected-error@+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "pt2.neg"(%x) : (f32) -> f32
  return %0 : f32
}

// -----

func.func @operand_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'pt2.add' op expects exactly 2 operands, but got 1}}
  %0 = "pt2.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @result_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'pt2.sort' op expects exactly 2 results, but got 1}}
  %0 = "pt2.sort"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @mistyped_attr(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  // expected-error@+1 {{'pt2.argmax' attribute 'keepdim' must be a bool (true/false)}}
  %0 = "pt2.argmax"(%x) {dim = 1 : i64, keepdim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @dtype_attr(%x: tensor<4xf32>) -> tensor<4xui16> {
  // expected-error@+1 {{'pt2.convert' attribute 'dtype' must be an element type (f32, f16, bf16, f64, i64, i32, i16, i8, ui8, i1)}}
  %0 = "pt2.convert"(%x) {dtype = ui16} : (tensor<4xf32>) -> tensor<4xui16>
  return %0 : tensor<4xui16>
}

// -----

func.func @too_many_entries(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'pt2.reshape' attribute 'shape' has 17 entries; pt2 tensors have at most 8 dims}}
  %0 = "pt2.reshape"(%x) {shape = array<i64: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @rank_9(%x: tensor<1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x2xf32> {
  // expected-error@+1 {{'pt2.relu' operand 0 has type tensor<1x1x1x1x1x1x1x1x2xf32>; pt2 needs a static-shaped tensor}}
  %0 = "pt2.relu"(%x) : (tensor<1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x2xf32>
  return %0 : tensor<1x1x1x1x1x1x1x1x2xf32>
}

// -----

func.func @element_count_overflow(%x: tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32> {
  // expected-error@+1 {{under 2^60 elements}}
  %0 = "pt2.neg"(%x) : (tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32>
  return %0 : tensor<4611686018427387904x4xf32>
}

// -----

func.func @unknown_dialect(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'mystery.op': operation being parsed with an unregistered dialect}}
  %0 = "mystery.op"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @region(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'pt2.neg' op unexpected number of regions: expected 0 but got 1}}
  %0 = "pt2.neg"(%x) ({
    "func.return"() : () -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @index_types_differ(%x: tensor<5x4xf32>, %i: tensor<3xi64>, %j: tensor<1xi64>) -> tensor<3xf32> {
  // IRDL binds the variadic index operands to one type (the builder's own
  // message for this is in tests/test_builder_errors.py)
  // expected-error@+1 {{'pt2.index': expected 'tensor<3xi64>' but got 'tensor<1xi64>'}}
  %0 = "pt2.index"(%x, %i, %j) {dims = array<i64: 0, 1>} : (tensor<5x4xf32>, tensor<3xi64>, tensor<1xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index_dims_count(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error@+1 {{'pt2.index' has 1 index operands for 2 dims}}
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 0, 1>} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index_dims_order(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error@+1 {{'pt2.index' dims must be increasing}}
  %0 = "pt2.index"(%x, %i, %i) {dims = array<i64: 1, 0>} : (tensor<5x4xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @index_float_index(%x: tensor<5x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expected-error@+1 {{'pt2.index' index operands must be int64/int32 tensors}}
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 0>} : (tensor<5x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @index_no_indices(%x: tensor<5x4xf32>) -> tensor<5x4xf32> {
  // expected-error@+1 {{'pt2.index' expects at least 2 operands, got 1}}
  %0 = "pt2.index"(%x) {dims = array<i64: 0>} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// -----

func.func @grouped_mm_k_mismatch(%a: tensor<10x8xf32>, %b: tensor<3x6x4xf32>, %o: tensor<3xi32>) -> tensor<10x4xf32> {
  // expected-error@+1 {{'pt2.grouped_mm' needs a [S, K], b [G, K, N] and offs [G] (got K 8 and 6, G 3 and 3)}}
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xf32>, tensor<3x6x4xf32>, tensor<3xi32>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}

// -----

func.func @grouped_mm_no_groups(%a: tensor<10x8xf32>, %b: tensor<0x8x4xf32>, %o: tensor<0xi32>) -> tensor<10x4xf32> {
  // expected-error@+1 {{'pt2.grouped_mm' needs at least one group (b is [0, K, N])}}
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xf32>, tensor<0x8x4xf32>, tensor<0xi32>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}

// -----

func.func @grouped_mm_float_offsets(%a: tensor<10x8xf32>, %b: tensor<3x8x4xf32>, %o: tensor<3xf32>) -> tensor<10x4xf32> {
  // expected-error@+1 {{'pt2.grouped_mm' offs must be i32 or i64}}
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xf32>, tensor<3x8x4xf32>, tensor<3xf32>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}
