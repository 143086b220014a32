"""Inputs whose strides are a permutation of a dense layout (channels last, transposes, permutes)
reach the graph as their own memory: the graph takes the input in its physical order and permutes
it back (capture/values.c, dense_order), so no copy is made at the call.  Against eager, on odd
sizes, several dtypes, in-place updates of such inputs, inputs returned as they are, and layouts
that are not dense (broadcasts, slices with steps), which are still packed."""
import pytest
import torch

import pt2
from capture_data import rand

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


def graph_input_types(fn, *args):
    """The graph's input types, as the dumped graph module spells them."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("PT2_DUMP")
        os.environ["PT2_DUMP"] = d
        try:
            pt2.reset()
            pt2.compile(fn)(*args)
        finally:
            if old is None:
                del os.environ["PT2_DUMP"]
            else:
                os.environ["PT2_DUMP"] = old
        import glob

        text = open(sorted(glob.glob(os.path.join(d, "*-graph", "00-input.mlir")))[0]).read()
    head = text.split("func.func @main(")[1].split(")")[0]
    return text, head


def layouts(shape, dtype):
    x = rand(*shape, dtype=dtype)
    yield "channels_last", x.contiguous(memory_format=torch.channels_last) if len(shape) == 4 else x.transpose(0, 1)
    yield "transpose", x.transpose(-1, -2)
    yield "permute", x.permute(*reversed(range(len(shape))))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 5, 7, 9), (2, 1, 5, 3), (7, 11)], ids=str)
def test_permuted_inputs_match_eager(shape, dtype):
    def f(x, y):
        if x.dtype == torch.bool:
            return (x & y.bool()).sum(-1), x.logical_not()
        return (x * 2 + y).abs().sum(-1), x - 1

    for name, x in layouts(shape, dtype):
        y = rand(*x.shape, dtype=torch.float32, seed=1).to(dtype)
        ref = f(x, y)
        pt2.reset()  # a fresh compile for each layout: no recompile limit across the parameters
        out = pt2.compile(f)(x, y)
        for a, b in zip(out, ref):
            torch.testing.assert_close(a, b, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-2 if dtype == torch.bfloat16 else 1e-5)


def test_channels_last_input_is_taken_in_its_own_order():
    x = rand(3, 5, 7, 9).contiguous(memory_format=torch.channels_last)
    text, head = graph_input_types(lambda x: (x * 2).relu(), x)
    assert "tensor<3x7x9x5xf32>" in head, head  # N, H, W, C: the memory's order
    assert '"pt2.permute"' in text and "perm = array<i64: 0, 3, 1, 2>" in text


def test_contiguous_input_is_not_permuted():
    text, head = graph_input_types(lambda x: (x * 2).relu(), rand(3, 5, 7))
    assert "tensor<3x5x7xf32>" in head and '"pt2.permute"' not in text


def test_matmul_of_transposed_inputs():
    a, b = rand(9, 13).t(), rand(7, 9, seed=2).t()  # [13, 9], [9, 7]: both transposed views

    def f(a, b):
        return a @ b + a.sum(1, keepdim=True)

    torch.testing.assert_close(pt2.compile(f)(a, b), f(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_in_place_update_of_a_permuted_input(dtype):
    def f(x):
        x.add_(1)
        return x * 2

    x1 = rand(2, 3, 4, 5, dtype=dtype).contiguous(memory_format=torch.channels_last)
    x2 = x1.clone()
    r1, r2 = pt2.compile(f)(x1), f(x2)
    torch.testing.assert_close(r1, r2)
    torch.testing.assert_close(x1, x2)
    assert x1.is_contiguous(memory_format=torch.channels_last)


def test_permuted_input_returned_as_is():
    a = rand(5, 6).t()
    out = pt2.compile(lambda a: (a, a + 1))(a)
    assert out[0] is a
    torch.testing.assert_close(out[1], a + 1)


def test_layout_change_recompiles():
    f = pt2.compile(lambda x: x.cumsum(1) * 2)
    x = rand(3, 5, 7, 9)
    for v in (x, x.contiguous(memory_format=torch.channels_last), x.transpose(1, 2), x):
        torch.testing.assert_close(f(v), v.cumsum(1) * 2)


def test_non_dense_layouts_are_packed():
    e = rand(5, 1).expand(5, 4)  # a broadcast: stride 0
    s = rand(5, 8, seed=3)[:, ::2]  # a slice with a step: gaps
    o = rand(6, 8, seed=4)[1:, 2:].t()  # a transposed window
    f = pt2.compile(lambda e, s, o: e * s + o[:4].t())
    torch.testing.assert_close(f(e, s, o), e * s + o[:4].t())
