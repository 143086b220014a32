"""Helpers for the op-by-op comparison with eager PyTorch."""
import torch

import pt2

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]
NUMERIC = FLOATS + INTS

# (rtol, atol) per result dtype: pt2 computes half precision in f32 and may
# fuse, so it can be *more* accurate than eager's per-op rounding.
TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-10, 1e-10),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}


def make(shape, dtype, low=-3.0, high=3.0, seed=0, noncontiguous=False):
    """A random tensor; ints in [low, high), bools 50/50.  With noncontiguous,
    the tensor is a transposed (or strided) view of a larger one."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    if noncontiguous and len(shape) >= 2:
        base = make(shape[::-1], dtype, low, high, seed)
        return base.permute(*reversed(range(len(shape))))
    if noncontiguous and len(shape) == 1:
        base = make((shape[0] * 2,), dtype, low, high, seed)
        return base[::2]
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    return torch.randint(int(low), int(high), shape, generator=g).to(dtype)


def run(build, inputs):
    """Builds a graph with `build(graph, *input_values)` (returning one value
    or a tuple), compiles it and runs it on `inputs`."""
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    out = build(g, *vals)
    outs = out if isinstance(out, tuple) else (out,)
    g.outputs(*outs)
    kernel = g.compile()
    results = kernel(*inputs)
    return results if isinstance(out, tuple) else results[0]


def assert_close(actual, expected, what="", tolerance=None):
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != eager's {expected.dtype}"
    assert tuple(actual.shape) == tuple(expected.shape), f"{what}: shape {tuple(actual.shape)} != eager's {tuple(expected.shape)}"
    if expected.dtype.is_floating_point:
        rtol, atol = tolerance or TOLERANCE[expected.dtype]
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(actual, expected), f"{what}: values differ\n{actual}\nvs eager\n{expected}"


def check(inputs, cases):
    """Compiles one graph holding every case and compares each output with eager.

    cases: (label, build, ref) triples; build(graph, *input_values) returns one
    pt2 value, ref(*inputs) the eager tensor; a fourth item (rtol, atol) replaces
    the dtype's tolerance (a long reduction, whose order differs between
    libraries and CPUs).  One compile covers many checks (each costs ~0.2 s);
    every mismatch is reported, each under its label."""
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    g.outputs(*[case[1](g, *vals) for case in cases])
    results = g.compile()(*inputs)
    failures = []
    for (label, _, ref, *tolerance), got in zip(cases, results):
        try:
            assert_close(got, ref(*inputs), label, *tolerance)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {len(cases)} checks failed:\n" + "\n".join(failures)
