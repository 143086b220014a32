"""Compiled outputs get eager's strides (docs/capture.md, "Calling compiled graphs"): the graph
builder derives eager PyTorch's strides of every value (dialects/strides.c: TensorIterator's order
for pointwise ops, views, channels last through convolutions, pooling and batch norm, contiguous
reductions), and a CPU output whose eager layout is a permuted dense one is computed in memory order
and returned as a strided view.  Every case compares strides and values with eager itself: strides
exactly on dims of size > 1 (a size-1 dim's stride says nothing), on odd sizes, several dtypes,
broadcasting, size-1 dims, and ops whose result is contiguous whatever the input."""
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2
from capture_data import rand

CL = torch.channels_last
CL3 = torch.channels_last_3d


def strides_of(t):
    """Strides of the dims of size > 1: the ones that say where elements are."""
    return tuple(s for s, n in zip(t.stride(), t.shape) if n != 1)


def check(fn, *args, atol=1e-5, rtol=1e-5):
    expected = fn(*args)
    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(2):  # the compiling call and a cached one
        got = compiled(*args)
        outs_e = expected if isinstance(expected, tuple) else (expected,)
        outs_g = got if isinstance(got, tuple) else (got,)
        for e, g in zip(outs_e, outs_g):
            assert g.shape == e.shape and g.dtype == e.dtype
            assert strides_of(g) == strides_of(e), (g.stride(), e.stride())
            assert g.is_contiguous() == e.is_contiguous()
            if e.dim() == 4:
                assert g.is_contiguous(memory_format=CL) == e.is_contiguous(memory_format=CL)
            if e.dtype.is_floating_point:
                torch.testing.assert_close(g, e, atol=atol, rtol=rtol)
            else:
                assert torch.equal(g, e)
    return got


# --- pointwise (TensorIterator) -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_pointwise_channels_last(dtype):
    x = rand(3, 5, 7, 9, dtype=dtype).to(memory_format=CL)
    if dtype == torch.bool:
        check(lambda x: x & ~x.logical_not(), x)
        check(lambda x: torch.where(x, 1.5, -2.0), x)
    else:
        out = check(lambda x: (x * 2).relu() + 1, x)
        assert out.is_contiguous(memory_format=CL)
        check(lambda x: x > 0, x)


def test_pointwise_channels_last_3d():
    x = rand(2, 3, 5, 4, 7).to(memory_format=CL3)
    out = check(lambda x: torch.sigmoid(x) * x - 1, x)
    assert out.is_contiguous(memory_format=CL3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_pointwise_transposed(dtype):
    x = rand(7, 5, dtype=dtype)
    out = check(lambda x: x.t() * 2, x)
    assert out.stride() == (1, 5)
    check(lambda x: (x.t() + 3).abs(), x)
    check(lambda x: x * 2, x.t())  # a transposed input
    check(lambda x: x.permute(2, 0, 1) - 1, rand(3, 4, 5, dtype=dtype))


def test_broadcast_channels_last_and_contiguous():
    cl = rand(2, 3, 5, 7).to(memory_format=CL)
    c = rand(2, 3, 5, 7, seed=1)
    check(lambda a, b: a + b, cl, c)  # the first input decides: channels last
    check(lambda a, b: a + b, c, cl)  # contiguous
    check(lambda a, b: a * b, cl, rand(3, 1, 1, seed=2))  # a bias-like broadcast keeps channels last
    check(lambda a, b: a - b, rand(3, 1, 1, seed=2), cl)
    check(lambda a, b: a + b, cl, rand(7, seed=3))
    check(lambda a, b: a < b, cl, c)
    check(lambda a, b: b > a, cl, c)
    check(lambda a: 2 - a, cl)
    check(lambda m, a, b: torch.where(m, a, b), (c > 0).to(memory_format=CL), c, cl)
    check(lambda m, a, b: torch.where(m, a, b), c > 0, cl, c)


def test_promotion_keeps_layout():
    x = rand(2, 3, 5, 7, dtype=torch.int64).to(memory_format=CL)
    check(lambda x: x * 1.5, x)
    check(lambda x, y: x + y, x, rand(2, 3, 5, 7, dtype=torch.float64))
    check(lambda x: torch.exp(x.float()), x)


def test_size_one_dims():
    check(lambda x: x * 2, rand(4, 1, 5, 6).to(memory_format=CL))
    check(lambda x: x * 2, rand(4, 3, 1, 1).to(memory_format=CL))
    check(lambda x: x * 2, rand(1, 3, 5, 1).to(memory_format=CL))
    check(lambda x, y: x + y, rand(4, 3, 1, 6).to(memory_format=CL), rand(4, 3, 1, 6, seed=1))
    check(lambda x: x.t() + 1, rand(1, 6))


def test_sliced_input():
    base = rand(2, 9, 5, 3).permute(0, 3, 1, 2)  # channels last
    check(lambda x: x * 2, base[:, :, ::2])  # not dense: packed at the call, eager's order kept
    check(lambda x: x[:, :, 1:4] + 1, base)


# addcmul, addcdiv (TensorIterator over input, tensor1, tensor2: pt2 adds input to their product, in
# that operand order) and lerp (where the input has the result's shape) keep eager's layout: every mix of
# contiguous, transposed, broadcast and strided-slice operands; bf16 computes in f32, rounding once
@pytest.mark.parametrize("op", ["addcmul", "addcdiv", "lerp", "lerp_tensor", "lerp_method"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ternary_pointwise_layouts(op, dtype):
    """Every mix of layouts, broadcast inputs included (lerp: TensorIterator's order over input, end and
    a tensor weight, the first deciding)."""
    layouts = {"contiguous": rand(5, 7, dtype=dtype), "transposed": rand(7, 5, seed=1, dtype=dtype).t(),
               "broadcast": rand(7, seed=2, dtype=dtype), "sliced": rand(10, 7, seed=3, dtype=dtype)[::2]}
    fns = {"addcmul": lambda x, y, z: torch.addcmul(x, y, z, value=0.5),
           "addcdiv": lambda x, y, z: torch.addcdiv(x, y, z.abs() + 1, value=-2),
           "lerp": lambda x, y, z: torch.lerp(x, y, 0.25),
           "lerp_tensor": lambda x, y, z: torch.lerp(x, y, z),
           "lerp_method": lambda x, y, z: x.lerp(y, weight=z)}
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    for x in layouts.values():
        for y in layouts.values():
            for z in layouts.values():
                check(fns[op], x, y, z, **tol)


# --- views and layout calls -----------------------------------------------------------------------

def test_views():
    x = rand(2, 3, 5, 7).to(memory_format=CL)
    check(lambda x: (x * 2).flatten(2), x)  # a view: (N, C, H*W) with C innermost
    check(lambda x: (x * 2).flatten(1), x)  # no view: reshape copies, contiguous
    check(lambda x: (x * 2).permute(0, 2, 3, 1), x)  # contiguous
    check(lambda x: (x * 2).transpose(1, 2) + 1, x)
    check(lambda x: (x + 1).unsqueeze(0) * 2, x)


def test_non_dense_views_come_back_dense():
    """Eager returns a view with gaps of an intermediate ((x * 2)[:, 1]); pt2 hands back only the
    view's elements, in a dense layout of the same dim order where it knows it."""
    x = rand(2, 3, 5, 7).to(memory_format=CL)
    for fn in (lambda x: (x * 2)[:, 1], lambda x: (x * 2)[:, :, ::2]):
        e = fn(x)
        pt2.reset()
        g = pt2.compile(fn)(x)
        torch.testing.assert_close(g, e)
        assert g.is_contiguous() or g.is_contiguous(memory_format=CL)


def test_layout_calls():
    x = rand(2, 3, 5, 7)
    check(lambda x: (x * 2).contiguous(), x.to(memory_format=CL))
    check(lambda x: (x * 2).contiguous(memory_format=CL), x)
    check(lambda x: (x * 2).to(memory_format=CL), x)
    check(lambda x: (x * 2).clone(memory_format=CL), x)
    check(lambda x: (x * 2).clone(), x.to(memory_format=CL))
    check(lambda x: x.double(memory_format=CL) + 1, x)
    check(lambda x: x.to(torch.float64) * 2, x.to(memory_format=CL))


def test_inplace_keeps_strides():
    def f(x, y):
        z = x * 1
        z.add_(y)
        return z

    check(f, rand(2, 3, 5, 7), rand(2, 3, 5, 7, seed=1).to(memory_format=CL))

    def g(x, y):
        x.add_(y)
        return x * 2

    a = rand(2, 3, 5, 7)
    b = rand(2, 3, 5, 7, seed=1).to(memory_format=CL)
    expected = g(a.clone(), b)
    pt2.reset()
    a2 = a.clone()
    got = pt2.compile(g)(a2, b)
    torch.testing.assert_close(got, expected)
    assert strides_of(got) == strides_of(expected)
    torch.testing.assert_close(a2, a + b)


# --- convolutions, batch norm, pooling ------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv2d_channels_last_input(dtype):
    x = rand(2, 3, 11, 9, dtype=dtype).to(memory_format=CL)
    w = rand(5, 3, 3, 3, dtype=dtype, seed=1)
    b = rand(5, dtype=dtype, seed=2)
    out = check(lambda x: F.conv2d(x, w, b), x)
    assert out.is_contiguous(memory_format=CL)
    check(lambda x: F.relu(F.conv2d(x, w, b, padding=1)), x)
    check(lambda x: F.conv2d(x, w, stride=2), x)


def test_conv2d_channels_last_weight():
    x = rand(2, 3, 11, 9)
    w = rand(5, 3, 3, 3, seed=1).to(memory_format=CL)
    out = check(lambda x: F.conv2d(x, w) + 1, x)
    assert out.is_contiguous(memory_format=CL)


def test_conv2d_contiguous():
    out = check(lambda x: F.conv2d(x, rand(5, 3, 3, 3, seed=1)), rand(2, 3, 11, 9))
    assert out.is_contiguous()


def test_conv1d_is_contiguous():
    x = rand(2, 7, 3).transpose(1, 2)  # (N, C, L) with C innermost
    check(lambda x: F.conv1d(x, rand(4, 3, 3, seed=1), rand(4, seed=2)), x)


def test_conv_bn_relu_channels_last():
    conv = nn.Conv2d(3, 8, 3, padding=1)
    bn = nn.BatchNorm2d(8)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    model = nn.Sequential(conv, bn, nn.ReLU()).eval()
    x = rand(2, 3, 13, 10).to(memory_format=CL)
    with torch.no_grad():
        out = check(model, x, atol=1e-4, rtol=1e-4)
    assert out.is_contiguous(memory_format=CL)


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        y = F.relu(self.bn2(self.conv2(x)))
        return y, F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1).flatten(1)


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
def test_small_conv_net(layout):
    model = SmallNet().eval()
    x = rand(2, 3, 17, 15)
    if layout == "channels_last":
        model = model.to(memory_format=CL)
        x = x.to(memory_format=CL)
    with torch.no_grad():
        outs = check(model, x, atol=1e-4, rtol=1e-4)
    assert outs[0].is_contiguous(memory_format=CL) == (layout == "channels_last")


def test_pool_and_pad_follow_input():
    x = rand(2, 3, 9, 8).to(memory_format=CL)
    check(lambda x: F.max_pool2d(x, 2), x)
    check(lambda x: F.avg_pool2d(x * 2, 3, stride=2), x)
    check(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), x)
    check(lambda x: F.pad(x, (1, 2, 0, 1)), x)
    check(lambda x: F.pad(x, (1, 2)), rand(2, 3, 9, 8).transpose(2, 3))  # dense but not channels last


def test_batch_norm_suggested_format():
    bn = nn.BatchNorm2d(3).eval()
    with torch.no_grad():
        check(bn, rand(2, 3, 7, 5).to(memory_format=CL))
        check(bn, rand(2, 3, 7, 5).transpose(2, 3))  # dense, not channels last: contiguous


# --- results contiguous whatever the input --------------------------------------------------------

def test_contiguous_results():
    x = rand(2, 3, 5, 7).to(memory_format=CL)
    check(lambda x: x.sum(2, keepdim=True), x)
    check(lambda x: x.amax(1, keepdim=True) * 2, x)
    check(lambda x: x.mean((2, 3), keepdim=True), x)
    check(lambda x: torch.softmax(x, 1), x)
    check(lambda x: torch.cumsum(x, 3), x)
    check(lambda x: F.layer_norm(x, (7,)), x)
    check(lambda x: x.masked_fill(x > 0, 0.5), x)
    check(lambda x: x.repeat(1, 1, 1, 2), x)
    check(lambda x: x.index_select(1, torch.tensor([2, 0])), x)
    t = rand(6, 5).t()
    check(lambda a: a @ rand(6, 4, seed=1), t)
    check(lambda a: F.linear(a, rand(3, 6, seed=1), rand(3, seed=2)), t)
    check(lambda a: torch.softmax(a, 0), t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_sort_keeps_layout(dtype):
    """sort's values and indices (argsort's too) take the input's strides where it is dense (ATen's sort
    meta), else the dense strides in its order; topk's are contiguous.  Distinct values: topk's order
    among ties is not eager's."""
    x = rand(5, 7, 6) if dtype.is_floating_point else torch.randperm(210, generator=torch.Generator().manual_seed(3)).reshape(5, 7, 6)
    for a in (x, x.transpose(0, 2), x.permute(1, 2, 0), x[:, 1:6], x.to(memory_format=torch.contiguous_format)[::2]):
        for dim in (0, 1, -1):
            check(lambda a: torch.sort(a, dim=dim, stable=True), a)
            check(lambda a: torch.argsort(a, dim=dim, stable=True) + 1, a)
            check(lambda a: torch.sort(a * 2, dim=dim, descending=True, stable=True)[0], a)
        check(lambda a: torch.topk(a, 2, dim=1), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_cat_and_stack_layouts(dtype):
    """cat's result is channels last only where every input suggests it (its meta's
    cat_compute_output_memory_format), else contiguous; stack is cat along the dim, viewed (along a
    new last dim: a cat of the inputs unsqueezed there)."""
    x = rand(2, 3, 5, 7, dtype=dtype)
    xl = x.to(memory_format=CL)
    y = rand(2, 4, 5, 7, seed=1, dtype=dtype).to(memory_format=CL)
    z = rand(2, 3, 5, 7, 3, dtype=dtype).to(memory_format=CL3)
    empty = torch.zeros(0, dtype=dtype)
    for a, b in ((xl, y), (x, y), (xl, x.transpose(2, 3).contiguous().transpose(2, 3))):
        check(lambda a, b: torch.cat([a, b, a], 1), a, b)
        check(lambda a, b: torch.cat([a, b[:, :3]], 0), a, b)
    check(lambda a, e: torch.cat([a, e, a], 2), xl, empty)  # a skipped 1-d input suggests contiguous
    check(lambda a: torch.cat([a, a], 4), z)
    check(lambda a: torch.cat([a, a.contiguous()], 1), z)
    for a in (xl, x, x.transpose(1, 3), rand(3, 5, 7, dtype=dtype).permute(2, 0, 1)):
        for dim in (0, 1, 2, -1):
            check(lambda a: torch.stack([a, a, a], dim), a)
        check(lambda a: torch.stack([a], 1), a)
    check(lambda a: torch.stack([a, a], 0), rand(5, 7, dtype=dtype).t())


def test_cat_and_meshgrid_results_written_in_place():
    """A stack of meshgrid's grids, then written through a select (BEiT's relative position index):
    one graph now that their strides are known, values as eager's."""
    def fn(x):
        coords = torch.flatten(torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij")), 1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += 2
        rel[:, :, 0] *= 7
        index = torch.zeros(13, 13, dtype=rel.dtype)
        index[1:, 1:] = rel.sum(-1)
        index[0, 0:] = 40
        index[0:, 0] = 41
        gx, gy = torch.meshgrid(x[:3], x[:5], indexing="xy")
        g = gx + 0
        g[1] += gy[1]
        return x[index.view(-1) % x.shape[0]], g
    x = rand(6)
    check(fn, x)
    assert pt2.explain(fn)(x).graph_break_count == 0


def test_unmodelled_ops_fall_back_to_contiguous_values():
    """Ops whose eager layout pt2 does not model: values right (strides contiguous, as before)."""
    x = rand(2, 3, 5, 7).to(memory_format=CL)
    for fn in (lambda x: F.group_norm(x, 3), lambda x: torch.zeros_like(x) + x):
        e = fn(x)
        pt2.reset()
        torch.testing.assert_close(pt2.compile(fn)(x), e)


def test_disable_switch(monkeypatch):
    monkeypatch.setenv("PT2_DISABLE", "output-strides")
    pt2.reset()
    x = rand(2, 3, 5, 7).to(memory_format=CL)
    out = pt2.compile(lambda x: (x * 2).relu())(x)
    assert out.is_contiguous()
    torch.testing.assert_close(out, (x * 2).relu())
    pt2.reset()


def test_output_view_memory_is_recycled():
    """A permuted output is a view of pooled memory: it goes back to the pool when dropped."""
    x = rand(4, 64, 32, 32).to(memory_format=CL)  # 1 MiB outputs: from the pool
    pt2.reset()
    f = pt2.compile(lambda x: x * 2)
    for _ in range(3):
        out = f(x)
        assert out.is_contiguous(memory_format=CL)
        torch.testing.assert_close(out, x * 2)
        del out


# --- is_contiguous() inside a trace ---------------------------------------------------------------

def test_is_contiguous_inside_the_trace():
    """x.is_contiguous() (and with memory_format=channels_last) inside traced code answers from the
    strides the builder derives, as eager does: a slice of an intermediate, a transpose, an expand, a
    permuted channels-last input, size-1 dims; code that branches on it takes eager's branch (it was
    always True: a slice's write through view(-1) went to the wrong element)."""
    def queries(x, c):
        y = x + 1
        views = (y, y[..., 1:], y.transpose(0, 1), y[:1], y.unsqueeze(0).expand(2, *y.shape), y[..., :1], c, c + 1,
                 c.permute(0, 2, 3, 1), c[:, :1])
        flags = [v.is_contiguous() for v in views] + [v.is_contiguous(memory_format=CL) for v in views if v.dim() == 4]
        return torch.tensor(flags)

    x, c = rand(3, 5, 2), rand(2, 3, 4, 5).to(memory_format=CL)
    got, want = pt2.compile(queries)(x, c), queries(x, c)
    assert torch.equal(got, want), (got, want)

    def branch(x):
        v = (x * 2).chunk(2, -1)[-1]
        if v.is_contiguous():
            return v.reshape(-1) + 100
        return v.contiguous().reshape(-1) - 100

    x = rand(3, 5, 2)
    torch.testing.assert_close(pt2.compile(branch)(x), branch(x))
