// RUN: pt2-opt %s --split-input-file --verify-diagnostics
// pt2.aten's program and result types are checked where the op is.

func.func @bad_program(%a: tensor<5x5xf32>) -> tensor<5x5xf32> {
  // expected-error@+1 {{'pt2.aten' attribute 'program': pt2.aten program, at character 17: expected ',' or ')'}}
  %x = "pt2.aten"(%a) {op = "inv", results = "f32[5,5]", program = "aten::inverse(%0 x) -> $0.0", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>) -> tensor<5x5xf32>
  return %x : tensor<5x5xf32>
}

// -----

func.func @count_mismatch(%a: tensor<5x5xf32>) -> tensor<5x5xf32> {
  // expected-error@+1 {{'pt2.aten' program reads 2 operand(s) and returns 1 value(s); the op has 1 and 1}}
  %x = "pt2.aten"(%a) {op = "inv", results = "f32[5,5]", program = "aten::mm(%0, %1) -> $0.0", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>) -> tensor<5x5xf32>
  return %x : tensor<5x5xf32>
}

// -----

func.func @bad_types(%a: tensor<5x5xf32>) -> tensor<5x5xf32> {
  // expected-error@+1 {{'pt2.aten' attribute 'results': "c64[5]" is not a list of tensor types such as f32[5,3];i64[]}}
  %x = "pt2.aten"(%a) {op = "inv", results = "c64[5]", program = "aten::inverse(%0) -> $0.0", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>) -> tensor<5x5xf32>
  return %x : tensor<5x5xf32>
}

// -----

func.func @wrong_result_type(%a: tensor<5x5xf32>) -> tensor<5x4xf32> {
  // expected-error@+1 {{'pt2.aten' result 0 has type tensor<5x4xf32>, but its operands and attributes give tensor<5x5xf32>}}
  %x = "pt2.aten"(%a) {op = "inv", results = "f32[5,5]", program = "aten::inverse(%0) -> $0.0", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>) -> tensor<5x4xf32>
  return %x : tensor<5x4xf32>
}

// -----

func.func @complex_without_imaginary_part(%a: tensor<5x5xf32>) -> tensor<5x5xf32> {
  // expected-error@+1 {{'pt2.aten' attribute 'program': pt2.aten program, at character 25: a complex number is c<real>,<imag>}}
  %x = "pt2.aten"(%a) {op = "mul", results = "f32[5,5]", program = "aten::mul.Scalar(%0, c1.5) -> $0.0", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>) -> tensor<5x5xf32>
  return %x : tensor<5x5xf32>
}

// -----

// A complex constant parses: c<real>,<imag>.
func.func @complex_constant(%a: tensor<5x5x2xf32>) -> tensor<5x5x2xf32> {
  %x = "pt2.aten"(%a) {op = "mul", results = "f32[5,5,2]", program = "aten::view_as_complex(%0) ; aten::mul.Scalar($0.0, c1.5,-2.0) ; aten::view_as_real($1.0) -> $2.0", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5x2xf32>) -> tensor<5x5x2xf32>
  return %x : tensor<5x5x2xf32>
}
