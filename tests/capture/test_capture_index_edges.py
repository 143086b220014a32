"""Indexing, in-place and argument edge cases against eager (found by fuzzing, 2026-12-03): the same
result and the same mutation of the inputs, or the same exception type and message.  In-place ops on
empty selections, in-place ops that change a tensor's shape (squeeze_, t_, ...), index writes on 0-d and
empty tensors, index_put's dtype check, eager's TypeErrors for malformed calls, nanmean's dtypes."""
import pytest
import torch

import pt2

T = torch.tensor


def outcome(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e), str(e)


def same_outcome(fn, *make):
    """fn on fresh copies of the inputs, eager and compiled: results, inputs after, exceptions."""
    pt2.reset()
    a, b = [m() for m in make], [m() for m in make]
    want, got = outcome(fn, a), outcome(pt2.compile(fn), b)
    assert want[0] == got[0], (want, got)
    if want[0] == "ok":
        w, g = want[1], got[1]
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, equal_nan=True)  # a product may round differently by an ulp
        for x, y in zip(a, b):
            if isinstance(x, torch.Tensor):
                torch.testing.assert_close(y, x, equal_nan=True, rtol=0, atol=0)
    else:
        assert got[1].startswith(want[1][:40]), (want, got)


def test_inplace_on_an_empty_selection_writes_nothing():
    def f(a):
        v = a * 1
        v[:, 1:].mul_(2)
        return v

    def g(a):
        a[:, 1:].mul_(2)
        a.narrow(1, 1, 0).fill_(3)
        return a

    def h(a):
        a[:, 1:] = torch.ones(3)  # the value does not broadcast to the (empty) selection: eager raises
        return a

    for fn in (f, g, h):
        same_outcome(fn, lambda: torch.randn(2, 1, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("name", ["squeeze", "squeeze0", "t", "transpose", "unsqueeze", "view_t", "base_t"])
def test_inplace_shape_changes(name):
    fns = {
        "squeeze": lambda x: x.squeeze_(),
        "squeeze0": lambda x: (x.squeeze_(0), x * 2),
        "t": lambda x: x[0].t_() * 1,
        "transpose": lambda x: x.transpose_(0, 2) + 1,
        "unsqueeze": lambda x: (x.unsqueeze_(1), x.sum()),
        "view_t": lambda x: (x[1].t_(), x + 0),
        "base_t": lambda x: (lambda w: (w.add_(1), x.t_(), w * 1)[2])(x[0]),
    }
    shape = (2, 2) if name == "base_t" else (1, 2, 2) if name != "t" else (2, 2, 2)
    same_outcome(fns[name], lambda: torch.arange(float(torch.Size(shape).numel())).reshape(shape))


def test_index_writes_on_0d_and_empty_tensors():
    x0 = lambda: T(5.0)  # noqa: E731
    e = lambda: torch.zeros(1, 0)  # noqa: E731
    cases = [
        (lambda x: x.index_add(0, T([0]), T(2.0)), x0), (lambda x: x.index_add(0, T([0]), torch.ones(1)), x0),
        (lambda x: x.index_add(0, T([1]), T(3.0)), x0), (lambda x: x.index_select(0, T([0, 0])), x0),
        (lambda x: x.index_select(0, T([1])), x0), (lambda x: x.index_fill(0, T([1]), 2.0), x0),
        (lambda x: x.index_fill(0, T([-1]), 2.0), x0), (lambda x: x.index_copy(0, T([0]), torch.ones(1)), x0),
        (lambda x: x.index_add(0, T([0]), T(True)), lambda: T(True)),
        (lambda x: x.index_select(0, T([3])), e), (lambda x: x.index_fill(0, T([3]), 1.0), e),
        (lambda x: x.index_copy(0, T([3]), torch.zeros(1, 0)), e), (lambda x: x.index_add(0, T([3]), torch.zeros(1, 0)), e),
        (lambda x: x.index_fill(0, T([0]), T([1.0])), lambda: torch.zeros(3, 4)),
        (lambda x: x.index_add(0, T([5]), torch.ones(1, 2)), lambda: torch.zeros(3, 2)),
        (lambda x: x.index_add(0, T([-1]), torch.ones(1, 2)), lambda: torch.zeros(3, 2)),
    ]
    for fn, make in cases:
        same_outcome(fn, make)


def test_index_put_requires_matching_dtypes():
    def f(x, i, v):
        x[i] = v
        return x

    x = lambda: torch.zeros(4, dtype=torch.int64)  # noqa: E731
    for i, v in [(T([0, 2]), T([1.5, 2.5])), (T([0, 2]), T(1.5)), (T([True, False, True, False]), T([1.5, 2.5])),
                 (T([True, False, True, False]), T(1.5)), (T([0, 2]), T([1, 2])), (slice(0, 2), T([1.5, 2.5]))]:
        same_outcome(f, x, lambda: i, lambda: v)
    same_outcome(lambda x, i, v: x.index_put((i,), v), x, lambda: T([0, 2]), lambda: T([1.5, 2.5]))


def test_malformed_calls_raise_as_eager():
    a = lambda: torch.randn(3, 5, generator=torch.Generator().manual_seed(1))  # noqa: E731
    for fn, make in [(lambda a: a.argsort(1, stable=True), a), (lambda a: a.flip(), a), (lambda a: a.permute(), lambda: T(3.0)),
                     (lambda a: a.prod([0, 1]), a), (lambda a: a.argsort(stable=True, dim=0), a), (lambda a: a.argsort(1, True), a),
                     (lambda a: a.flip(0, 1), a), (lambda a: a.prod(1, keepdim=True), a)]:
        same_outcome(fn, make)


@pytest.mark.parametrize("fn, x", [(lambda x: x.nanmean(), T([1, 2, 4])), (lambda x: x.nanmean(0), T([True, False])),
                                   (lambda x: x.nanmean(0, dtype=torch.int32), T([1.0, 2.5])),
                                   (lambda x: x.nanmean(0, dtype=torch.float64), T([1.0, float("nan"), 2.5]))])
def test_nanmean_dtypes(fn, x):
    same_outcome(fn, lambda: x.clone())


def test_flip_and_permute_dims_keyword():
    """x.flip(dims=...) and x.permute(dims=...) (Longformer's) are one graph with eager's values (the
    method forms took only positional dims: a break)."""
    x = torch.arange(24.0).reshape(2, 3, 4)
    for f in (lambda a: a.flip(dims=[0]) + torch.flip(a, dims=(1,)), lambda a: a.permute(dims=(2, 0, 1)) * 2):
        pt2.reset()
        info = pt2.explain(f)(x)
        assert info.graph_break_count == 0, info.break_reasons
        assert torch.equal(pt2.compile(f)(x), f(x))


def test_tensor_stride():
    """x.stride() and x.stride(dim) where pt2 knows eager's strides (inputs, views, permuted
    results): one graph with eager's answers, for contiguous and transposed inputs."""
    fs = (lambda a: (a * 2, a.stride(), a.transpose(0, 2).stride(1)),
          lambda a: (a + 1).permute(2, 0, 1).stride(),
          lambda a: a[:, 1:].stride(-1) * a + a.stride(0))
    for x in (torch.arange(24.0).reshape(2, 3, 4), torch.arange(24.0).reshape(4, 3, 2).permute(2, 1, 0)):
        for f in fs:
            pt2.reset()
            info = pt2.explain(f)(x)
            assert info.graph_break_count == 0, info.break_reasons
            got, want = pt2.compile(f)(x), f(x)
            assert str(got) == str(want)
