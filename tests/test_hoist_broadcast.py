"""pt2-hoist-broadcast-values (passes/hoist_broadcast.c) against eager PyTorch: values that elementwise fusion
left inside a consumer computed per broadcast row (a concatenated bias, a gathered per-column scale, a
per-channel expression of loads) computed once in a generic of their own.  Compiled graphs in f32, bf16
and int64, odd sizes, broadcasts over leading and middle dims, non-contiguous inputs; the IR after the
pass (PT2_DUMP) shows the hoisted generic; PT2_DISABLE=hoist-broadcast gives the same results."""
import glob
import os
import tempfile

import pytest
import torch

import pt2

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
       torch.int64: dict(rtol=0, atol=0)}


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-20, 20, shape, generator=g).to(dtype)


def compiled(fn, *args, disable=None):
    """fn through pt2.compile and its IR after pt2-hoist-broadcast-values."""
    with tempfile.TemporaryDirectory() as d:
        saved = {k: os.environ.get(k) for k in ("PT2_DUMP", "PT2_DISABLE")}
        os.environ["PT2_DUMP"] = d
        if disable:
            os.environ["PT2_DISABLE"] = disable
        try:
            pt2.reset()
            with torch.no_grad():
                out = pt2.compile(fn)(*args)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        ir = "".join(open(f).read() for f in sorted(glob.glob(os.path.join(d, "*", "*-pt2-hoist-broadcast-values.mlir"))))
        return out, ir


def check(fn, *args, dtype=torch.float32):
    with torch.no_grad():
        want = fn(*args)
    got, ir = compiled(fn, *args)
    torch.testing.assert_close(got, want, **TOL[dtype])
    off, _ = compiled(fn, *args, disable="hoist-broadcast")
    torch.testing.assert_close(off, want, **TOL[dtype])
    return ir


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rows", [37, 2 * 197])
def test_concatenated_bias_after_a_matmul(dtype, rows):
    """BEiT's qkv: a linear without bias, then cat(q_bias, zeros, v_bias) added per column."""
    x, w = rand(rows, 24, dtype=dtype), rand(3 * 20, 24, dtype=dtype, seed=1)
    q, v = rand(20, dtype=dtype, seed=2), rand(20, dtype=dtype, seed=3)
    k = torch.zeros(20, dtype=dtype)

    def f(x, w, q, k, v):
        return torch.nn.functional.linear(x, w) + torch.cat((q, k, v))

    ir = check(f, x, w, q, k, v, dtype=dtype)
    suffix = "bf16" if dtype == torch.bfloat16 else "f32"
    assert ": tensor<60x%s>) {" % suffix in ir, ir  # the bias, once


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_gathered_scale_over_leading_and_middle_dims(dtype):
    """A per-column value through a gather and a flip, read by a [5, 33, 17] tensor (non-contiguous)."""
    x = rand(17, 33, 5, dtype=dtype).permute(2, 1, 0)
    table, idx = rand(40, dtype=dtype, seed=4), torch.randint(0, 40, (17,), generator=torch.Generator().manual_seed(5))

    def f(x, table, idx):
        s = table[idx].flip(0) * 3 - 1
        return x * s + s.abs()

    check(f, x, table, idx, dtype=dtype)


def test_per_channel_expression_of_loads_in_the_middle():
    """A [C] value of two pads and a cat read by an [N, C, H] tensor: the broadcast dims on both sides."""
    x = rand(3, 29, 11)
    a, b = rand(13, seed=6), rand(15, seed=7)

    def f(x, a, b):
        c = torch.cat((torch.nn.functional.pad(a, (1, 0)), b + 1))[None, :, None]
        return torch.relu(x - c) * c.sigmoid()

    ir = check(f, x, a, b)
    assert "tensor<29xf32>" in ir or "tensor<1x29x1xf32>" in ir


def test_small_broadcast_left_in_place():
    """Four rows: the per-column loads stay in the consumer; results match either way."""
    x, q = rand(4, 16), rand(16, seed=8)
    check(lambda x, q: x + q.flip(0), x, q)
