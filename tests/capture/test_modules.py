"""pt2.compile on nn.Modules, guards, recompiles, fallbacks and the torch.compile backend."""
import os
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from models import examples  # noqa: E402


def check(model, *inputs, tol=1e-4, graphs=None, breaks=None):
    pt2.reset()
    with torch.no_grad():
        compiled = pt2.compile(model)
        for x in inputs:
            ref = model(*x) if isinstance(x, tuple) else model(x)
            out = compiled(*x) if isinstance(x, tuple) else compiled(x)
            torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
        info = pt2.explain(model)(*inputs[0]) if isinstance(inputs[0], tuple) else pt2.explain(model)(inputs[0])
    if graphs is not None:
        assert info.graph_count == graphs, info.break_reasons
    if breaks is not None:
        assert info.graph_break_count == breaks, info.break_reasons
    return info


def test_linear_relu_sequential():
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    check(m, torch.randn(4, 16), torch.randn(7, 16), graphs=1, breaks=0)


def test_activation_modules():
    m = nn.Sequential(nn.GELU(), nn.SiLU(), nn.Tanh(), nn.Sigmoid(), nn.LeakyReLU(0.1), nn.Hardswish(), nn.ELU(), nn.Softplus()).eval()
    check(m, torch.randn(5, 9), graphs=1, breaks=0)


def test_norm_modules():
    m = nn.Sequential(nn.LayerNorm(12), nn.Dropout(0.5)).eval()
    check(m, torch.randn(3, 12), graphs=1, breaks=0)
    g = nn.GroupNorm(2, 6).eval()
    check(g, torch.randn(2, 6, 5, 5), graphs=1, breaks=0)


def test_conv_bn_relu_pool():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten()).eval()
    with torch.no_grad():  # non-trivial running statistics
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    check(m, torch.randn(2, 3, 16, 16), graphs=1, breaks=0)


@pytest.mark.parametrize("batch_first,norm_first", [(True, False), (False, True)])
def test_transformer_encoder_layer(batch_first, norm_first):
    # nn.MultiheadAttention's Python path (F.multi_head_attention_forward:
    # has_torch_function, unflatten, is_nested) in one graph; the fused
    # fast path is a C call pt2 cannot capture, so it is switched off
    m = nn.TransformerEncoderLayer(24, 4, 40, dropout=0.0, batch_first=batch_first, norm_first=norm_first).eval()
    x = torch.randn(3, 7, 24)
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        check(m, x, x[:, :5].contiguous(), graphs=1, breaks=0)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def test_unflatten():
    def f(x):
        return x.unflatten(1, (2, -1)) * 2, torch.unflatten(x, -1, (3, 2, 1)).sum(2)

    check(f, torch.randn(4, 6))


def test_embedding_module():
    m = nn.Embedding(50, 16).eval()
    check(m, torch.tensor([[1, 4, 9], [0, 49, 2]]), graphs=1, breaks=0)


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})
        self.scale = 0.5

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = x + self.scale * F.relu(layer(x)) * (i + 1)
        return {k: head(x) for k, head in self.heads.items()}, self.layers[-1](x)


def test_module_list_and_dict():
    m = Stack().eval()
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m)
        x = torch.randn(4, 8)
        out, last = c(x)
        ref, ref_last = m(x)
        for k in ref:
            torch.testing.assert_close(out[k], ref[k])
        torch.testing.assert_close(last, ref_last)
        assert pt2.explain(m)(x).graph_count == 1


def test_examples_match_eager():
    for name, model, x in examples():
        info = check(model, x, tol=1e-4)
        assert info.graph_count == 1 and info.graph_break_count == 0, (name, info.break_reasons)


def test_training_flag_is_guarded():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.0)).eval()
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m)
        x = torch.randn(2, 4)
        torch.testing.assert_close(c(x), m(x))
        m.train()  # the guard on .training fails: recompiled (dropout p=0 is still an identity)
        torch.testing.assert_close(c(x), m(x))
        assert pt2._C.cache_size(type(m).forward.__code__) >= 1


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 3, 1, bias=False), nn.BatchNorm2d(3)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def test_guards_through_shared_prefixes_see_every_change():
    """A check fetches each source prefix once (L['self'], L['self']._modules['1'], ...: guards.c's
    nodes) for the hundreds of guards under it; a change anywhere below is still seen: a deep
    parameter replaced by another shape, a deep submodule replaced, a deep training flag, an
    in-place update, a hook added on a deep module."""
    m = nn.Sequential(*[nn.Sequential(*[_Block() for _ in range(3)]) for _ in range(3)]).eval()
    x = torch.randn(2, 3, 5, 7)
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m)
        torch.testing.assert_close(c(x), m(x))
        m[2][1].conv.weight = nn.Parameter(torch.randn(3, 3, 1, 1))  # same shape: an input, read anew
        torch.testing.assert_close(c(x), m(x))
        m[1][2].bn.running_var.mul_(4)
        torch.testing.assert_close(c(x), m(x))
        m[2][2].conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)  # another shape: recompiled
        torch.testing.assert_close(c(x), m(x))
        m[0][1] = nn.Identity()  # another type
        torch.testing.assert_close(c(x), m(x))
        m[1][0].bn.train()  # batch statistics from now on
        torch.testing.assert_close(c(x), m(x))
        m[1][0].bn.eval()
        h = m[2][0].register_forward_hook(lambda mod, args, out: out * 2)
        torch.testing.assert_close(c(x), m(x))
        h.remove()
        torch.testing.assert_close(c(x), m(x))


def test_shape_and_dtype_guards_recompile():
    def f(x):
        return x * 2 + 1

    pt2.reset()
    c = pt2.compile(f)
    for x in (torch.randn(3), torch.randn(5), torch.randn(5, dtype=torch.float64), torch.randn(5).t(), torch.arange(5)):
        torch.testing.assert_close(c(x), f(x))
    assert pt2._C.cache_size(f.__code__) == 4  # 1-d transposed is the same guard as (5,)


def test_parameters_are_inputs_not_constants():
    m = nn.Linear(4, 3).eval()
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m)
        x = torch.randn(2, 4)
        c(x)
        m.weight.mul_(2)  # an in-place update of a parameter is seen by the next call
        torch.testing.assert_close(c(x), m(x))


def test_requires_grad_runs_eagerly():
    m = nn.Linear(4, 3)  # parameters require grad, grad mode on: not captured, never wrong
    x = torch.randn(2, 4)
    out = pt2.compile(m)(x)
    torch.testing.assert_close(out, m(x))
    assert out.requires_grad


def test_recompile_limit_warns_once():
    def f(x, k):
        return x * k

    pt2.reset()
    pt2._C.set_recompile_limit(2)
    try:
        c = pt2.compile(f)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for k in range(6):
                torch.testing.assert_close(c(torch.ones(2), k), torch.ones(2) * k)
        msgs = [str(x.message) for x in w if "recompile" in str(x.message).lower() or "limit" in str(x.message).lower()]
        assert len(msgs) == 1, [str(x.message) for x in w]
        assert "EQUALS_MATCH" in msgs[0] or "k" in msgs[0]
    finally:
        pt2._C.set_recompile_limit(8)


class _Layer(nn.Module):
    """A layer whose forward breaks the graph (print) and folds its index into its graph."""

    def __init__(self, i):
        super().__init__()
        self.i = i
        self.lin = nn.Linear(8, 8)

    def forward(self, x, k=1):
        x = self.lin(x)
        if self.i % 2 == 0:
            x = x * 2
        print("", end="")
        return x + self.i * k


class _Stack(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList([_Layer(i) for i in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_recompile_limit_counts_each_module_apart():
    """A forward compiled once per layer (each layer's index a constant of its graph, the loop over the
    layers running in CPython after a break) is not one layer recompiling: each module object has a
    recompile limit of its own, as Dynamo's ID-matched entries do.  12 layers, no warning, eager's values."""
    m = _Stack(12).eval()
    x = torch.randn(3, 8)
    pt2.reset()
    with torch.no_grad(), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = pt2.compile(m)
        for _ in range(2):
            torch.testing.assert_close(c(x), m(x))
    assert not [str(x.message) for x in w if "recompile limit" in str(x.message)]
    assert pt2._C.cache_size(_Layer.forward.__code__) >= 12


def test_recompile_limit_of_one_module_object():
    """One module object called with more constants than the limit still reaches it, once, named in the
    warning, while another layer object still compiles."""
    layers = [_Layer(i).eval() for i in range(2)]
    x = torch.randn(3, 8)
    pt2.reset()
    pt2._C.set_recompile_limit(3)
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c = pt2.compile(lambda x, layer, k: layer(x, k))
            for k in range(6):
                torch.testing.assert_close(c(x, layers[0], k), layers[0](x, k))
            size = pt2._C.cache_size(_Layer.forward.__code__)
            torch.testing.assert_close(c(x, layers[1], 1), layers[1](x, 1))
            assert pt2._C.cache_size(_Layer.forward.__code__) == size + 1
        msgs = [str(x.message) for x in w if "recompile limit" in str(x.message) and "_Layer.forward" in str(x.message)]
        assert len(msgs) == 1 and "for one _Layer object" in msgs[0], msgs
    finally:
        pt2._C.set_recompile_limit(8)


def test_fullgraph_error_names_construct_and_line():
    def f(x):
        y = x + 1
        print(y.shape)
        return y

    with pytest.raises(pt2.Unsupported, match=r"(?s)print\(\).*test_modules.py:\d+"):
        pt2.compile(f, fullgraph=True)(torch.ones(2))


def test_exception_from_user_code_propagates():
    def f(x):
        if x.shape[0] > 2:
            raise ValueError("too big")
        return x + 1

    c = pt2.compile(f)
    torch.testing.assert_close(c(torch.ones(2)), torch.ones(2) + 1)
    with pytest.raises(ValueError, match="too big"):
        c(torch.ones(3))


def test_unsupported_inputs_fall_back():
    def f(x):
        return x * 2

    c = pt2.compile(f)
    z = torch.randn(3, dtype=torch.complex64)
    torch.testing.assert_close(c(z), z * 2)
    u = torch.arange(4, dtype=torch.uint8)
    torch.testing.assert_close(c(u), u * 2)


def test_torch_compile_backend():
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    torch._dynamo.reset()
    with torch.no_grad():
        c = torch.compile(m, backend="pt2")
        torch.testing.assert_close(c(x), m(x))


class _SlicedBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.arange(32).view(1, 32))
        self.emb = nn.Embedding(32, 6)
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        pos = self.pos[:, : x.shape[1]]  # Dynamo's FX code: x[(slice(None, None, None), slice(0, n, None))]
        return self.lin(self.emb(pos) + x).relu()


def test_torch_compile_backend_compiles_fx_graph():
    """The FX forward Dynamo hands over is itself one pt2 graph: slice() calls and the lazily
    generated GraphModule's forward are captured, not run eagerly."""
    from pt2._compile import _dynamo_backend

    m = _SlicedBuffer().eval()
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return _dynamo_backend(gm, example_inputs)

    torch._dynamo.reset()
    pt2.reset()
    with torch.no_grad():
        c = torch.compile(m, backend=backend)
        for n in (5, 5, 9):
            x = torch.randn(2, n, 6)
            torch.testing.assert_close(c(x), m(x))
        assert len(seen) == 2  # the second with the length as an input (Dynamo's automatic dynamic)
        assert all(pt2._C.cache_size(type(gm).forward.__code__) >= 1 for gm, _ in seen)
        for gm, example_inputs in seen:
            e = pt2.explain(gm.forward)(*[int(v) if isinstance(v, torch.SymInt) else v for v in example_inputs])
            assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


def test_decorator_forms():
    @pt2.compile
    def f(x):
        return x.relu()

    @pt2.compile(fullgraph=True)
    def g(x):
        return x.sigmoid()

    x = torch.randn(4)
    torch.testing.assert_close(f(x), x.relu())
    torch.testing.assert_close(g(x), x.sigmoid())
    with pytest.raises(ValueError):
        pt2.compile(f, backend="nope")


class _Scale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.w = nn.Parameter(torch.full((3,), float(k)))

    def forward(self, x):
        return x * self.w + self.k


def test_instances_of_a_class_share_compiled_code():
    """Modules are guarded by type; their attributes are guarded one by one,
    so a second instance with the same constants reuses the entry, and one
    with another constant gets its own."""
    pt2.reset()
    a, b, c = _Scale(2), _Scale(2), _Scale(5)
    x = torch.ones(3)

    def f(m, x):
        return m(x)

    cf = pt2.compile(f)
    with torch.no_grad():
        b.w.mul_(3)  # different parameter values, same constants
        for m in (a, b, c):
            torch.testing.assert_close(cf(m, x), m(x))
    assert pt2._C.cache_size(f.__code__) == 2  # a and b share; c's k differs


def test_code_without_tensor_ops_runs_in_cpython():
    """A function with no tensor op is not compiled (as Dynamo skips frames
    without content): called with twelve different constants, it neither
    recompiles up to the limit nor warns, and gives CPython's results."""
    pt2.reset()

    def rename(key, flag):
        return key.upper() + ("!" if flag else "")

    cf = pt2.compile(rename)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(12):
            assert cf(f"k{i}", i % 2) == rename(f"k{i}", i % 2)
    assert pt2._C.cache_size(rename.__code__) == 0
    assert pt2.explain(rename)("a", True).graph_count == 0


class _Cache:
    """A plain Python object made afresh for every call (as transformers' DynamicCache)."""

    def __init__(self, scale=2.0):
        self.scale = scale


def test_new_object_per_call_does_not_recompile():
    """Objects are guarded by type plus the attributes read, not by identity:
    twelve fresh objects share one entry; another attribute value recompiles;
    `is` between objects is guarded by identity where it is decided."""
    pt2.reset()
    x = torch.arange(4.0)

    def f(x, cache):
        return x * cache.scale

    cf = pt2.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(12):
            torch.testing.assert_close(cf(x, _Cache()), x * 2)
    assert pt2._C.cache_size(f.__code__) == 1
    torch.testing.assert_close(cf(x, _Cache(3.0)), x * 3)

    def g(a, b, x):
        return x + 1 if a is b else x - 1

    cg = pt2.compile(g)
    o, p = _Cache(), _Cache()
    for a, b in [(o, o), (o, p), (p, p), (p, o)]:
        torch.testing.assert_close(cg(a, b, x), g(a, b, x))


def test_forward_hooks_run_in_the_graph():
    """Forward hooks and pre-hooks of the modules called (feature extraction into a list, a pre-hook
    replacing the input, hooks changing the output, with_kwargs): nn.Module._call_impl inlined, one
    graph, eager's values and the same features collected; removing a hook recompiles."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    feats = []
    net[0].register_forward_hook(lambda m, i, o: feats.append(o.detach()))
    net[2].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    plus_one = net[1].register_forward_hook(lambda m, i, o: o + 1)
    net[2].register_forward_hook(lambda m, args, kwargs, out: out * 3, with_kwargs=True)
    x = torch.randn(2, 4)
    pt2.reset()
    with torch.no_grad():
        want = net(x)
        want_feats, feats[:] = list(feats), []
        c = pt2.compile(net)
        torch.testing.assert_close(c(x), want)
        assert len(feats) == 1
        torch.testing.assert_close(feats[0], want_feats[0])
        info = pt2.explain(net)(x)
        assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
        plus_one.remove()
        torch.testing.assert_close(c(x), net(x))


def test_modules_made_in_the_forward():
    """Modules made inside the compiled code from constants whose constructor is torch.nn's and which
    hold no parameter or buffer (nn.Softmax(dim=-1)(x), nn.Upsample(...), an activation class of
    one's own without __init__, as transformers' ACT2FN makes them): made at trace time, one graph.
    One with parameters (nn.Linear made in a forward: new random weights every call) keeps eager's
    behaviour."""
    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)

    def fn(x):
        y = nn.Softmax(dim=-1)(x)
        z = nn.Upsample(scale_factor=2, mode="nearest")(y[None])
        k = x.shape[-1] // 2
        padded = nn.ConstantPad1d((k - 1, k), 0.5)(x)  # arguments a tuple made in the trace (Canine)
        return nn.ReLU()(z) + Swish()(x).sum() + nn.Identity()(x).mean() + padded.sum()

    x = torch.randn(3, 4, 5)
    with torch.no_grad():
        pt2.reset()
        torch.testing.assert_close(pt2.compile(fn)(x), fn(x))
        info = pt2.explain(fn)(x)
        assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons

        def fresh_linear(x):
            return nn.Linear(5, 2)(x)

        c = pt2.compile(fresh_linear)
        torch.manual_seed(1)
        want = fresh_linear(x)
        torch.manual_seed(1)
        torch.testing.assert_close(c(x), want)
        assert not torch.equal(c(x), c(x))  # new weights every call, as in eager


def test_namedtuple_fields_of_objects_from_outside():
    """A namedtuple held by a dict from outside (torch's pytree registry holds NodeDefs): its fields read
    through collections' C _tuplegetter, without a break."""
    import collections

    Pair = collections.namedtuple("Pair", "scale shift")
    table = {"k": Pair(2.0, 3.0)}

    def fn(x):
        entry = table["k"]
        return x * entry.scale + entry.shift

    x = torch.randn(3)
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x), fn(x))
    info = pt2.explain(fn)(x)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons


def test_buffer_stored_again_as_itself():
    """`self.buf = self.buf.to(device=..., dtype=x.dtype)` of the buffer's own device and dtype (CTRL's
    positional encoding): .to() returns the buffer itself and nn.Module.__setattr__ changes nothing, so
    it is no break; storing another tensor there still breaks (eager replaces the buffer)."""
    class Pos(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(6, 4), persistent=False)

        def forward(self, x):
            self.table = self.table.to(device=x.device, dtype=x.dtype)
            return x + self.table[: x.shape[0]]

    class Replace(Pos):
        def forward(self, x):
            self.table = self.table * 1
            return x + self.table[: x.shape[0]]

    x = torch.randn(5, 4)
    for cls, breaks in ((Pos, 0), (Replace, 1)):
        torch.manual_seed(0)
        m, ref = cls(), cls()
        ref.load_state_dict(m.state_dict())
        ref.table = m.table.clone()
        pt2.reset()
        c = pt2.compile(m)
        for _ in range(2):
            torch.testing.assert_close(c(x), ref(x))
        assert pt2.explain(cls())(x).graph_break_count == breaks


def test_numpy_ufunc_of_constants_and_numpy_float64():
    """A numpy ufunc of Python numbers is computed at trace time (CTRL's `x *= np.sqrt(d_model)`), and a
    numpy.float64 (a float subclass) from outside is a constant guarded by type and value."""
    import numpy as np

    class Scale(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.gain = np.float64(1.5)

        def forward(self, x):
            x = x * np.sqrt(self.d)
            x *= np.exp(0.25)
            return x * self.gain + np.float64(2.0)

    m = Scale(16)
    x = torch.randn(3, 4)
    pt2.reset()
    c = pt2.compile(m)
    torch.testing.assert_close(c(x), m(x))
    m.gain = np.float64(-0.5)  # the guard sees the new value
    torch.testing.assert_close(c(x), m(x))
    info = pt2.explain(m)(x)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons


class _Router(nn.Module):
    """SwitchTransformers' router: `self.classifier = self.classifier.to(self.dtype)` in forward."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.classifier = nn.Linear(6, 4)
        self.register_buffer("steps", torch.zeros(2, dtype=torch.long))
        self.dtype = dtype

    def forward(self, x):
        self.classifier = self.classifier.to(self.dtype)
        return self.classifier.to("cpu")(x.to(self.dtype)) + self.to(dtype=torch.float32, device="cpu").classifier(x)


def test_module_to_that_changes_nothing():
    """module.to(dtype / device) of a module whose parameters and buffers already have them (integer
    buffers keep theirs) is the module itself, and assigning it back changes nothing: one graph (a break
    at torch._C._nn._parse_to before).  A .to() that converts stays Module.to's own code."""
    check(_Router().eval(), torch.randn(3, 6), graphs=1, breaks=0)
    x = torch.randn(3, 6)
    torch.manual_seed(0)
    m = _Router(torch.float64).eval()
    torch.manual_seed(0)
    ref = _Router(torch.float64).eval()
    pt2.reset()
    with torch.no_grad():
        got, want = pt2.compile(m)(x), ref(x)
    torch.testing.assert_close(got, want)
    assert m.classifier.weight.dtype == ref.classifier.weight.dtype
