"""Returned views of inputs (capture/results.c, OUT_VIEW): `x[0]`, `x.t()`, `x.view(...)` come back as views of
the caller's tensor, as eager's do: the same memory, eager's strides and storage offset, `_base` the input, writes
through them reaching it; no kernel runs for them.  Oracle: eager on the same arguments."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check, input_of


def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


VIEWS = [
    lambda x: x[1],
    lambda x: x[:, 1:5:2],
    lambda x: x[-2:, ..., 0],
    lambda x: x.t(),
    lambda x: x.transpose(0, 1)[2],
    lambda x: x.unsqueeze(0).expand(3, *x.shape),
    lambda x: x.reshape(-1) if x.is_contiguous() else x.flatten(0, 0),
    lambda x: x.narrow(1, 2, 3).select(0, -1),
    lambda x: torch.chunk(x, 3, dim=1),
    lambda x: x.unbind(0),
    lambda x: x.split([2, 5], dim=1),
    lambda x: torch.broadcast_to(x[0], (4, *x[0].shape)),
    lambda x: x.diagonal(),
    lambda x: (x[1], x[1] * 2, x),
]


@pytest.mark.parametrize("k", range(len(VIEWS)))
@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed", "offset"])
def test_views_of_inputs(k, layout):
    base = rand(9, 14, seed=k)
    x = {"contiguous": base[:5, :7].contiguous(), "sliced": base[1:6, ::2], "transposed": base[:7, :5].t(),
         "offset": base.view(-1)[11:46].view(5, 7)}[layout]
    check(VIEWS[k], x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_dtypes_and_channels_last(dtype):
    x = (rand(2, 3, 5, 4) * 4).to(dtype).contiguous(memory_format=torch.channels_last)
    check(lambda x: (x[:, 1], x.permute(0, 2, 3, 1), x[..., 1:3]), x)


def test_writes_through_reach_the_input():
    x, xe = rand(4, 6), rand(4, 6)
    f = lambda x: (x[1:3, ::2], x.t())
    got, want = pt2.compile(f)(x), f(xe)
    for g, w in zip(got, want):
        assert g._base is x and w._base is xe
        g.mul_(3), w.mul_(3)
    torch.testing.assert_close(x, xe, rtol=0, atol=0)


def test_after_mutation_and_in_place_on_a_view():
    def f(x):
        x.mul_(2)
        y = x[:, 1:3]
        F.relu(y, inplace=True)
        return y, x[0]

    x = rand(3, 5)
    xe = x.clone()
    got, want = pt2.compile(f)(x), f(xe)
    torch.testing.assert_close(x, xe, rtol=0, atol=0)
    for g, w in zip(got, want):
        assert input_of(g, (x,)) is x and (g.stride(), g.storage_offset()) == (w.stride(), w.storage_offset())
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    got[0].fill_(7)
    assert (x[:, 1:3] == 7).all()


def test_one_object_per_returned_view_and_the_cache_hit():
    f = pt2.compile(lambda x: (x[0], x[0] + 1))
    for _ in range(3):
        x = rand(3, 4)
        a, b = f(x)
        assert a._base is x and b._base is None
        torch.testing.assert_close(b, x[0] + 1)
    g = pt2.compile(lambda x: [x.t()] * 2)
    r = g(x)
    assert r[0] is r[1] and r[0]._base is x


def test_views_of_made_tensors_stay_outputs():
    """A view of a tensor the graph makes is the graph's output (no input memory involved)."""
    x = rand(4, 6)
    check(lambda x: (x * 2)[1:3].t(), x)
    r = pt2.compile(lambda x: (x * 2)[1])(x)
    assert input_of(r, (x,)) is None


def test_switch_off():
    """PT2_DISABLE=input-views: a copy, as before (read when the frame is compiled)."""
    import os
    x = rand(4, 6)
    os.environ["PT2_DISABLE"] = "input-views"
    try:
        pt2.reset()
        r = pt2.compile(lambda x: x[1])(x)
    finally:
        del os.environ["PT2_DISABLE"]
        pt2.reset()
    assert r._base is not x and torch.equal(r, x[1])
