"""Writes docs/dialect.md from the op catalog (dialects/catalog.def via libpt2).

Run after changing the catalog: `PYTHONPATH=python python3 scripts/gen_dialect_doc.py`.
tests/test_docs.py fails when docs/dialect.md is out of date."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

HEADER = """# The pt2 dialect

Generated from `dialects/catalog.def` by `scripts/gen_dialect_doc.py`; do not edit by hand.

pt2 is a tensor-level dialect with PyTorch's semantics (broadcasting, type promotion done by the
graph builder, negative dims, keepdim).  It is defined without C++: the IRDL text (`pt2-opt
--print-irdl`) is generated from the catalog and loaded with `mlirLoadIRDLDialects`; IRDL checks
that every operand and result is a ranked tensor, and the C verifier (`pt2-verify`, run after parsing
and before every pass pipeline) checks element types, shapes and attributes with the catalog's shape
rules (`dialects/meta.c`).  Ops print in MLIR's generic form:

```mlir
%0 = "pt2.softmax"(%x) {dim = -1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
```

Element types: `f32`, `f16`, `bf16`, `f64`, `i64`, `i32`, `i16`, `i8`, `ui8` (uint8), `i1` (bool); static shapes,
rank <= 8.  `ui8` is the one unsigned type: pt2-lower computes it in `i8` with unsigned operations (docs/passes.md).
Attribute types: `i64` (`1 : i64`), `i64[]` (`array<i64: 0, 1>`), `f64` (`1.0 : f64`), `bool`,
`dtype` (a type: `f16`), `str` (`"tanh"`), `dense` (a dense elements attribute).  `?` marks an
optional attribute, `=v` a default that the verifier and builder fill in.

Composite ops are rewritten into primitives by `pt2-decompose`; primitives are lowered by `pt2-lower`.
An operand count `n+` means n or more: the operands from the n-th on are one variadic group, which
IRDL binds to one type (`pt2.index`'s index tensors, which capture broadcasts to one shape).

## Scalars of f16/bf16 ops

The graph builder (`dialects/builder.c`) promotes operands as PyTorch's `result_type`: a Python number
(a *weak* scalar) takes the tensor's type.  Eager's f16/bf16 kernels then read some of these scalars in
f32, their opmath type, and the rule differs per kernel and per device, so the builder follows the
device whose eager results the graph must reproduce (`pt2GraphSetEagerDevice`; capture sets it from
the graph's tensors):

- on the CPU, `mul`, `div` and `floor_div` read a second operand of one element and another type (a
  number or a 0-d tensor) as f32 (TensorIterator's `original_scalar_value`); `add`, `sub`, comparisons
  and the rest round it to the half type;
- on CUDA, `add`, `sub` and `mul` read a Python number on either side as f32, `div` and `floor_div` one on
  the right; comparisons and the rest round it.  A division by a number is a product with its
  reciprocal taken in f32 (f64 for f64 tensors), as CUDA's `div_true_kernel`, for every float type.

Where a scalar is read in f32, the op computes in f32 and rounds once:
`x_bf16 * 0.3` is `convert(mul(convert(x, f32), 0.3 : f32), bf16)`, not a product with 0.30078125.
A number the half type holds exactly changes nothing.  Capture traces `n / x` as eager's
`x.reciprocal() * n` and `n * x`, `n + x` as `x * n`, `x + n` (the reflected methods).

## pt2.aten: PyTorch's own kernels

`pt2.aten` is a torch function pt2 has no form for, kept in the graph (capture records it on meta
tensors: docs/capture.md): its `program` is the aten calls to make, its `results` the result types.
Its operands and results may have any types, so each is an optional group of its own in IRDL (up to
16 operands and 4 results) and the op carries `operandSegmentSizes`/`resultSegmentSizes`:

```mlir
%x = "pt2.aten"(%a, %b) {op = "linalg_solve", program = "aten::linalg_solve(%0, %1, b1) -> $0.0",
    results = "f32[5,3]", operand_strides = "5,1;3,1",
    operandSegmentSizes = array<i32: 1, 1, 0, ...>, resultSegmentSizes = array<i32: 1, 0, 0, 0>}
    : (tensor<5x5xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
```

A program is calls separated by ` ; `, then ` -> ` and the references the op returns.  Each call is
`aten::<name>[.<overload>](args)`, its arguments in the schema's order: `%k` operand k, `$c.r` result r of
call c (`$c.r.e`: element e of a list result), `i<int>`, `f<float>`, `c<real>,<imag>` (a complex number),
`b0`/`b1`, `n` (None),
`s<length>:<bytes>`, `d<dtype>` (`dfloat32`), `D` (the kernel's device), `l<layout>`, `m<memory format>`,
`I[..]`/`F[..]`/`B[..]` (int, float, bool lists), `T[..]` (Tensor[]) and `O[..]` (Tensor?[], `n` for None).
The verifier parses it (dialects/aten.c) and checks that it reads no more operands than the op has and
returns as many values as the op has results; pt2-lower makes it a call into libpt2rt (docs/passes.md).

| op | kind | operands → results | attributes | summary | PyTorch callables |
|---|---|---|---|---|---|
"""


def main():
    import pt2

    def count(n):
        return f"{-n}+" if n < 0 else str(n)

    rows = []
    n_comp = 0
    for op in pt2.catalog():
        n_comp += op["composite"]
        attrs = op["attrs"].replace("|", "\\|") or "–"
        rows.append(
            f"| `pt2.{op['name']}` | {'composite' if op['composite'] else 'primitive'} | {count(op['n_operands'])} → {count(op['n_results'])} | "
            f"`{attrs}` | {op['summary'].replace('|', '/')} | {op['torch'].replace(',', ', ')} |"
        )
    total = len(rows)
    text = HEADER + "\n".join(rows) + f"\n\n{total} ops: {total - n_comp} primitives, {n_comp} composites.\n"
    out = os.path.join(HERE, "..", "docs", "dialect.md")
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        with open(out) as f:
            return 0 if f.read() == text else 1
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {out}: {total} ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
