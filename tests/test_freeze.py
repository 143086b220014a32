"""pt2.compile(freeze=True): parameters and buffers as constants (pt2-freeze), against eager PyTorch.

Batch norms fold into convolution weights, what depends on weights alone runs
once in the kernel's prologue, and each frozen tensor is guarded by identity,
data pointer and version counter, so changing a weight recompiles.
"""
import pytest
import torch
import torch.nn as nn

import pt2
from pt2 import _core


def randomize_bn(m):
    """Non-trivial statistics and affine parameters in every batch norm of m."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                mod.running_mean.uniform_(-1, 1)
                mod.running_var.uniform_(0.3, 2)
                if mod.affine:
                    mod.weight.uniform_(0.5, 2)
                    mod.bias.uniform_(-1, 1)
    return m


def tolerance(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)


def frozen_guards(model, *args, **compile_kw):
    compiled = pt2.compile(model, **compile_kw)
    with torch.no_grad():
        info = pt2.explain(compiled)(*args)
    return [g for g in info.out_guards if g.startswith("FROZEN")]


def run_frozen(model, x, dtype=torch.float32):
    """Compiled with freeze=True under no_grad: equal to eager, every parameter frozen."""
    pt2.reset()
    model = model.to(dtype).eval()
    x = x.to(dtype)
    with torch.no_grad():
        compiled = pt2.compile(model, freeze=True)
        ref = model(x)
        torch.testing.assert_close(compiled(x), ref, **tolerance(dtype))
        torch.testing.assert_close(compiled(x), ref, **tolerance(dtype))  # the kept prologue results
        info = pt2.explain(compiled)(x)
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons
    assert any(g.startswith("FROZEN") for g in info.out_guards)
    return compiled


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "conv",
    [
        dict(in_channels=3, out_channels=5, kernel_size=3, padding=1),
        dict(in_channels=4, out_channels=7, kernel_size=(3, 2), stride=2, bias=False),
        dict(in_channels=6, out_channels=9, kernel_size=3, groups=3, padding=2, dilation=2),
        dict(in_channels=5, out_channels=5, kernel_size=1),
    ],
)
def test_conv_bn_relu(conv, dtype):
    m = randomize_bn(nn.Sequential(nn.Conv2d(**conv), nn.BatchNorm2d(conv["out_channels"]), nn.ReLU()))
    run_frozen(m, torch.randn(2, conv["in_channels"], 11, 13), dtype)
    n_params = sum(1 for _ in m.parameters()) + sum(1 for _ in m.buffers()) - 1  # num_batches_tracked is not read
    assert len(frozen_guards(m, torch.randn(2, conv["in_channels"], 11, 13).to(dtype), freeze=True)) == n_params


@pytest.mark.parametrize("affine", [True, False])
def test_bn_without_affine_and_chains(affine):
    m = randomize_bn(
        nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, affine=affine), nn.ReLU(),
            nn.Conv2d(8, 6, 3, stride=2), nn.BatchNorm2d(6, affine=affine),
            nn.MaxPool2d(2), nn.BatchNorm2d(6, affine=affine), nn.ReLU(),  # a batch norm after a pool: x*s + shift
        )
    )
    run_frozen(m, torch.randn(3, 3, 17, 15))


def test_bn_not_folded_when_the_conv_output_is_reused():
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y  # y read twice: the batch norm is x*s + shift

    run_frozen(randomize_bn(Residual()), torch.randn(2, 4, 9, 9))


def test_batch_norm_1d_after_linear():
    m = randomize_bn(nn.Sequential(nn.Linear(12, 10), nn.BatchNorm1d(10), nn.ReLU(), nn.Linear(10, 3)))
    run_frozen(m, torch.randn(7, 12))

    class Sequence(nn.Module):  # (N, C, L): the batch norm of 1-d convolution nets
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 6)
            self.bn = nn.BatchNorm1d(6)

        def forward(self, x):
            return self.bn(self.proj(x).transpose(1, 2))

    run_frozen(randomize_bn(Sequence()), torch.randn(2, 9, 4))


def test_weight_cast_and_transposed_weight():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 5, dtype=torch.float64))
            self.register_buffer("scale", torch.rand(5) + 0.5)

        def forward(self, x):
            # computed from frozen values alone: the prologue; x @ w.t() stays a view
            return x @ (self.w.float() * self.scale).t() + x.sum()

    run_frozen(Net(), torch.randn(4, 5))


def test_returned_frozen_value():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            return x + 1, self.w * 2, torch.exp(self.w).sum()

    pt2.reset()
    m = Net()
    x = torch.randn(3, 4)
    with torch.no_grad():
        out = pt2.compile(m, freeze=True)(x)
        for a, b in zip(out, m(x)):
            torch.testing.assert_close(a, b)


def test_inplace_weight_update_recompiles():
    m = randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())).eval()
    x = torch.randn(2, 3, 8, 8)
    code = type(m).forward.__code__
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m, freeze=True)
        torch.testing.assert_close(c(x), m(x))
        assert pt2._C.cache_size(code) == 1
        m[0].weight.mul_(-2)  # an in-place update: the version counter moves
        torch.testing.assert_close(c(x), m(x))
        m[1].running_var.fill_(4.0)  # a buffer
        torch.testing.assert_close(c(x), m(x))
        m.load_state_dict(randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())).state_dict())
        torch.testing.assert_close(c(x), m(x))
        m[0].bias = nn.Parameter(torch.randn(4))  # a new tensor
        torch.testing.assert_close(c(x), m(x))
        m[0].weight.data = torch.randn(4, 3, 3, 3)  # new memory, same tensor and version
        torch.testing.assert_close(c(x), m(x))
        assert pt2._C.cache_size(code) == 6
        torch.testing.assert_close(c(x), m(x))  # unchanged since: no recompile
        assert pt2._C.cache_size(code) == 6


def test_grad_mode_with_trainable_parameters_never_freezes():
    # under grad mode with parameters that require grad the frame runs
    # eagerly (training is not compiled): right values, and autograd works
    m = randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))).eval()
    x = torch.randn(2, 3, 7, 7)
    pt2.reset()
    c = pt2.compile(m, freeze=True)
    out = c(x)
    ref = m(x)
    torch.testing.assert_close(out, ref)
    assert out.requires_grad
    out.sum().backward()
    assert m[0].weight.grad is not None
    with torch.no_grad():  # then, under no_grad, frozen
        torch.testing.assert_close(c(x), m(x))
    assert frozen_guards(m, x, freeze=True)


def test_grad_mode_with_frozen_parameters():
    # grad mode on, but no parameter requires grad: inference all the same
    m = randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))).eval().requires_grad_(False)
    x = torch.randn(2, 3, 7, 7)
    pt2.reset()
    c = pt2.compile(m, freeze=True)
    torch.testing.assert_close(c(x), m(x))
    assert frozen_guards(m, x, freeze=True)


def test_max_autotune_implies_freezing():
    m = nn.Linear(4, 3).eval()
    x = torch.randn(2, 4)
    assert len(frozen_guards(m, x, mode="max-autotune")) == 2
    assert frozen_guards(m, x, mode="max-autotune", freeze=False) == []
    assert frozen_guards(m, x) == []


def test_frozen_and_plain_entries_are_separate():
    # compiled entries belong to a code object; the freeze mode is guarded,
    # so a plain entry is never used by a frozen compile, nor the reverse
    m = randomize_bn(nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3))).eval()
    x = torch.randn(1, 2, 6, 6)
    code = type(m).forward.__code__
    pt2.reset()
    with torch.no_grad():
        for freeze, entries in ((False, 1), (True, 2), (False, 2), (True, 2)):
            torch.testing.assert_close(pt2.compile(m, freeze=freeze)(x), m(x))
            assert pt2._C.cache_size(code) == entries


def test_plain_tensor_attributes_and_arguments_are_not_frozen():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.table = torch.randn(4)  # not registered: an ordinary input

        def forward(self, x, w):
            return self.lin(x) * self.table + w

    guards = frozen_guards(Net(), torch.randn(2, 4), torch.randn(4), freeze=True)
    assert sorted(g.split(":")[0] for g in guards) == ["FROZEN L['self'].lin.bias", "FROZEN L['self'].lin.weight"]


def test_disable_freezing(monkeypatch):
    monkeypatch.setenv("PT2_DISABLE", "freezing")
    m = randomize_bn(nn.Sequential(nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5)))
    run_frozen(m, torch.randn(2, 3, 9, 9))


def test_non_contiguous_frozen_parameter():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(5, 6).t())  # a transposed view as the parameter

        def forward(self, x):
            return x @ (self.w * 3)

    run_frozen(Net(), torch.randn(2, 6))


# --- the C API, through the ctypes binding ----------------------------------


def bn_graph(n, c, h, w, dtype=torch.float32):
    """conv2d(x, w) + b, batch-normed: weight, bias and statistics frozen."""
    g = _core.Graph()
    x = g.input(dtype, [n, c, h, w])
    frozen = [g.input(dtype, [c, c, 3, 3]), g.input(dtype, [c])] + [g.input(dtype, [c]) for _ in range(4)]
    for v in frozen:
        g.freeze(v)
    y = g.op("conv2d", x, frozen[0], padding=[1, 1])
    y = g.op("add", y, g.op("reshape", frozen[1], shape=[c, 1, 1]))
    g.outputs(g.op("batch_norm", y, *frozen[2:], eps=1e-3))
    return g


def bn_reference(x, w, b, mean, var, gamma, beta):
    return torch.nn.functional.batch_norm(torch.nn.functional.conv2d(x, w, b, padding=1), mean, var, gamma, beta, eps=1e-3)


def test_kernel_prologue_runs_once_and_resets():
    k = bn_graph(2, 3, 6, 5).compile()
    assert k.has_prologue and k.frozen_inputs == [1, 2, 3, 4, 5, 6]
    x = torch.randn(2, 3, 6, 5)
    params = [torch.randn(3, 3, 3, 3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3)]
    torch.testing.assert_close(k(x, *params)[0], bn_reference(x, *params))
    changed = [p * 2 for p in params]
    # the contract: the kernel keeps what it computed from the frozen inputs
    torch.testing.assert_close(k(x, *changed)[0], k(x, *params)[0])
    k.reset_frozen()
    torch.testing.assert_close(k(x, *changed)[0], bn_reference(x, *changed))


def test_kernel_frozen_inputs_strided_and_disabled(monkeypatch):
    x = torch.randn(1, 4, 5, 5, dtype=torch.float64)
    params = [torch.randn(4, 4, 3, 3, dtype=torch.float64).transpose(2, 3), torch.randn(4, dtype=torch.float64)]
    params += [torch.randn(4, dtype=torch.float64), torch.rand(4, dtype=torch.float64) + 0.5]
    params += [torch.randn(8, dtype=torch.float64)[::2], torch.randn(4, dtype=torch.float64)]  # non-contiguous
    k = bn_graph(1, 4, 5, 5, torch.float64).compile()
    torch.testing.assert_close(k(x, *params)[0], bn_reference(x, *params))
    monkeypatch.setenv("PT2_DISABLE", "freezing")
    plain = bn_graph(1, 4, 5, 5, torch.float64).compile()
    assert not plain.has_prologue and plain.frozen_inputs == []
    torch.testing.assert_close(plain(x, *params)[0], bn_reference(x, *params))


def test_frozen_mark_needs_an_input():
    g = _core.Graph()
    x = g.input(torch.float32, [3])
    y = g.op("exp", x)
    with pytest.raises(_core.Pt2Error, match="not an input"):
        g.freeze(y)
    g.outputs(y)
    g.freeze(x)  # after the outputs too
    assert "pt2.frozen" in g.text()


@pytest.fixture(autouse=True)
def _clean():
    yield
    pt2.reset()
