"""Capture of what Hugging Face models do most, each compared with eager:
super() calls, Python properties and __getattribute__, closures over tensors,
imports inside functions, tensor attributes and builtins (no graph break now);
in-place tensor ops (rewritten functionally, inputs written back), attribute
assignment and container mutation (replayed, or a clean graph break)."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2
from test_capture import A, AB, compare, r


def run_both(fn, make_inputs, tol=1e-5):
    """Eager and compiled on fresh copies of the same inputs; compares the
    results and the inputs afterwards (mutations must match eager's)."""
    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(2):  # capture, then the cache-hit path
        eager_in, pt2_in = make_inputs(), make_inputs()
        with torch.no_grad():
            ref = fn(*eager_in)
            out = compiled(*pt2_in)
        compare(out, ref, tol)
        compare(list(pt2_in), list(eager_in), tol, "inputs after the call")


def counts(fn, *args):
    with torch.no_grad():
        e = pt2.explain(fn)(*args)
    return e.graph_count, e.graph_break_count, e.break_reasons


def check(fn, make_inputs, graphs=1, breaks=0, tol=1e-5):
    run_both(fn, make_inputs, tol)
    g, b, reasons = counts(fn, *make_inputs())
    assert (g, b) == (graphs, breaks), reasons


# ---------------------------------------------------------------- super(), properties, __getattribute__


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self._scale = 1.5

    @property
    def scale(self):
        return self._scale * 2

    def helper(self, x):
        return x * self.scale

    def forward(self, x):
        return self.lin(x)


class Child(Base):
    def forward(self, x):
        y = super().forward(x)
        return super().helper(y) + self.scale + Base.helper(self, x)


def test_super_and_property_inlined():
    m = Child().eval()
    check(m, lambda: (r(3, 6),), tol=1e-4)


class Config:
    """A config in the style of transformers' PretrainedConfig."""

    attribute_map = {"hidden": "hidden_size"}

    def __init__(self):
        object.__setattr__(self, "hidden_size", 4)
        object.__setattr__(self, "_impl_internal", "sdpa")
        object.__setattr__(self, "eps", 1e-5)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    @property
    def _impl(self):
        return self._impl_internal


_config = Config()


def config_reads(x):
    spec = _config.__dict__.get("_not_there")
    y = x * _config.hidden + _config.eps
    if _config._impl == "sdpa" and spec is None:
        return y + 1
    return y - 1


def test_custom_getattribute_and_property():
    check(config_reads, A(2, 4))


class Registry:
    _mapping = {"relu": F.relu, "gelu": F.gelu}

    def __getitem__(self, key):
        return self._mapping[key]

    def __contains__(self, key):
        return key in self._mapping


_registry = Registry()


def mapping_protocol(x):
    fn = _registry["gelu"] if "gelu" in _registry else _registry["relu"]
    return fn(x), "tanh" in _registry


def test_user_getitem_and_contains():
    check(mapping_protocol, A(5))


# ---------------------------------------------------------------- closures, imports, attributes, builtins


def make_closure(w):
    def f(x):
        return x @ w + 1

    return f


def test_closure_over_tensor():
    f1, f2 = make_closure(r(4, 3)), make_closure(r(4, 3, seed=5))
    check(f1, A(2, 4), tol=1e-4)
    pt2.reset()
    c1, c2 = pt2.compile(f1), pt2.compile(f2)  # one code object, two closures
    x = r(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(c1(x), f1(x))
        torch.testing.assert_close(c2(x), f2(x))


def imports_inside(x):
    import math as m
    import torch.nn.functional
    from torch.nn import functional as F2

    return F2.relu(x) * m.pi + torch.nn.functional.silu(x)


def test_import_of_loaded_modules():
    check(imports_inside, A(6))


def imports_missing(x):
    import pt2_no_such_module_for_tests  # noqa: F401

    return x


def test_import_of_missing_module_raises_like_eager():
    pt2.reset()
    with pytest.raises(ModuleNotFoundError):
        pt2.compile(imports_missing)(r(2))


def tensor_attributes(x):
    n = x.ndim + len(x.shape)
    same = x.dtype == torch.float32 and x.device.type == "cpu"
    return x.T * n if same else x, type(x) is torch.Tensor, type(x.shape) is torch.Size, str(type(x))


def test_tensor_attributes_and_builtins():
    check(tensor_attributes, A(3, 2))


# ---------------------------------------------------------------- in-place tensor ops


def inplace_local(x, mask, z):
    y = x * 2
    y.add_(1)
    y.mul_(3).sub_(x, alpha=0.5)
    y.relu_()
    y[0] = 5
    y[:, 1:3] = x[:, :2]
    y[1, ::2] = -1.0
    y[..., -1] = z[:, 0]
    y.masked_fill_(mask, 0.25)
    w = y.clone()
    w.copy_(z)
    w += 1
    y[y > 4] = 4
    return y, w, F.relu(x - 1, inplace=True)


def test_inplace_on_graph_locals():
    make = lambda: (r(4, 5), r(4, 5, dtype=torch.bool), r(4, 5, seed=3))  # noqa: E731
    check(inplace_local, make)


def inplace_input(x, y):
    x.add_(y)
    x[0] = 0
    return x * 2


def test_inplace_on_input_is_written_back():
    check(inplace_input, AB((3, 4), (4,)))


def augmented_alias(x):
    y = x * 1
    z = y
    y += 1  # Tensor.__iadd__: z is the same tensor
    return z


def test_augmented_assignment_mutates_aliases():
    check(augmented_alias, A(4))


def clone_then_inplace(x):
    y = x.clone()
    y.mul_(10)
    return x + 0, y


def test_clone_is_a_new_tensor():
    check(clone_then_inplace, A(3))


def inplace_through_view(x):
    y = x * 1
    v = y[0]
    y.add_(1)  # v must see this: taken again from y's new value (inplace.c)
    return v + 0


def test_inplace_with_a_view_is_seen_by_the_view():
    check(inplace_through_view, A(3, 2))


def inplace_bad_cast(x):
    x.add_(1.5)
    return x


def test_inplace_cast_error_like_eager():
    pt2.reset()
    with pytest.raises(RuntimeError):
        inplace_bad_cast(torch.arange(3))
    with pytest.raises(RuntimeError):
        pt2.compile(inplace_bad_cast)(torch.arange(3))


def mutate_first(a, b):
    a.mul_(2)
    return a + b


def test_aliased_inputs_run_eagerly():
    pt2.reset()
    c = pt2.compile(mutate_first)
    x, y = r(4), r(4, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(c(x.clone(), y.clone()), mutate_first(x.clone(), y.clone()))
        e, p = x.clone(), x.clone()
        torch.testing.assert_close(c(p, p), mutate_first(e, e))  # b is a: eager sees the doubled values
        torch.testing.assert_close(p, e)


def test_relu_inplace_module():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2)).eval()
    check(m, A(3, 4), tol=1e-4)


# ---------------------------------------------------------------- attribute assignment, containers


class Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.last = None
        self.mode = "a"

    def forward(self, x):
        self.last = self.lin(x) * 2
        self.mode = "b"
        return self.last + 1, self.mode


def test_attribute_assignment_replayed():
    m_eager, m_pt2 = Recorder().eval(), Recorder().eval()
    m_pt2.load_state_dict(m_eager.state_dict())
    pt2.reset()
    c = pt2.compile(m_pt2)
    x = r(2, 3)
    with torch.no_grad():
        ref, out = m_eager(x), c(x)
    compare(out, ref, 1e-4)
    torch.testing.assert_close(m_pt2.last, m_eager.last)
    assert m_pt2.mode == m_eager.mode == "b"
    m_pt2.mode = "a"
    g, b, reasons = counts(m_pt2, x)
    assert (g, b) == (1, 0), reasons


def local_containers(x):
    items = []
    items.append(x)
    items += [x * 2]
    d = {}
    d["a"] = x + 1
    d.update(b=x - 1)
    d.pop("a")
    return items, d


def test_local_container_mutation():
    check(local_containers, A(3))


def mutate_argument_list(xs):
    xs.append(xs[0] * 2)
    return xs[-1] + 1


def test_input_list_mutation_runs_in_cpython():
    run_both(mutate_argument_list, lambda: ([r(3)],))


# ---------------------------------------------------------------- a transformers model


def test_transformers_bert_breaks_fewer():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 100, (1, 16))
    with torch.no_grad():
        ref = model(input_ids=ids).last_hidden_state
        e = pt2.explain(model)(input_ids=ids)
    torch.testing.assert_close(e.result.last_hidden_state, ref, rtol=1e-4, atol=1e-4)
    # 41 breaks before super()/properties/imports/__getattribute__ were captured
    assert e.graph_break_count <= 24, e.break_reasons


def test_transformers_masked_lm_matches_eager():
    """BertForMaskedLM builds its MaskedLMOutput after a graph break, with a
    super().__setattr__ method value live at a break inside ModelOutput: that
    break must run in CPython rather than resume with a made-up attribute."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    model = transformers.BertForMaskedLM(cfg).eval()
    ids = torch.randint(0, 100, (1, 16))
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        pt2.reset()
        out = pt2.compile(model)(input_ids=ids)
    torch.testing.assert_close(out.logits, ref, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- dict subclasses read from outside


class OptionDict(dict):
    pass


class HoldsOptions:
    def __init__(self, options):
        self.options = options

    def __eq__(self, other):  # the harness compares inputs after the call
        return type(other) is HoldsOptions and other.options == self.options


def branch_on_option_dict(x, holder):
    if holder.options:  # truth of a dict subclass: its length, guarded
        x = x + len(holder.options)
    if "scale" in holder.options:
        x = x * holder.options["scale"]
    return x * 2


@pytest.mark.parametrize("options", [OptionDict(), OptionDict(a=1), OptionDict(a=1, scale=3.0)])
def test_truth_and_len_of_dict_subclass(options):
    check(branch_on_option_dict, lambda: (r(5, 3), HoldsOptions(options)))
    compiled = pt2.compile(branch_on_option_dict)
    x = r(5, 3)
    for other in (OptionDict(), OptionDict(b=2), OptionDict(b=2, scale=0.5)):  # guards on the length and keys
        holder = HoldsOptions(other)
        compare(compiled(x, holder), branch_on_option_dict(x, holder), 1e-5)


# ---------------------------------------------------------------- tril / triu (causal masks)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 2), (2, 1, 6, 6)])
def test_tril_triu(dtype, shape):
    def masks(x, d):
        if x.dtype == torch.bool:
            return torch.tril(x, d) | x.triu(diagonal=d + 1), torch.triu(x, -d)
        return torch.tril(x, d) + x.triu(diagonal=-d) * 2, torch.triu(x)

    def make(d):
        return lambda: (r(*shape, dtype=dtype, lo=-5, hi=5).transpose(-1, -2), d)  # non-contiguous

    for d in (0, 2, -1):
        check(masks, make(d))


# ---------------------------------------------------------------- TIMM's constructs: hardsigmoid, roll, batch statistics


FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
HSIG = nn.Hardsigmoid()  # a module from outside: inlined


def _tol(dtype):
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5


@pytest.mark.parametrize("dtype", FLOATS)
def test_hardsigmoid_and_roll(dtype):
    def f(x):
        return F.hardsigmoid(x) + torch.roll(x, 2, -1) + x.roll((1, -3), (0, 1)) + torch.roll(x, 5) + HSIG(x * 2)

    check(f, lambda: (r(5, 7, dtype=dtype, lo=-5, hi=5).t(),), tol=_tol(dtype))  # non-contiguous, odd sizes
    check(lambda x: torch.roll(x, 0) * 1, lambda: (r(3, 4, dtype=dtype),), tol=_tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_over_batch_statistics(dtype):
    def standardized(w, gain):  # timm's ScaledStdConv2d: the weight standardized per output channel
        return F.batch_norm(w.reshape(1, w.shape[0], -1), None, None, weight=gain.view(-1), training=True, momentum=0.0,
                            eps=1e-5).reshape_as(w)

    def per_channel(x):
        return F.batch_norm(x, None, None, training=True)

    check(standardized, lambda: (r(6, 3, 3, 5, dtype=dtype), r(6, 1, 1, 1, dtype=dtype, lo=0.5, hi=1.5)), tol=_tol(dtype))
    check(per_channel, lambda: (r(4, 3, 5, 2, dtype=dtype),), tol=_tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_updates_running_statistics(dtype):
    """Training mode with running statistics: the batch's statistics normalize, and the running mean and
    variance (unbiased) move by the momentum, in place as eager moves them, in one graph; the stats of the
    input's dtype, float32 ones for a 16-bit input, and a strided view of a larger buffer."""
    def f(x, m, v):
        return F.batch_norm(x, m, v, training=True, momentum=0.3) * 2

    def aten(x, m, v, w, b):  # torch.batch_norm's signature (exported programs), the default momentum
        return torch.batch_norm(x, w, b, m, v, True, 0.1, 1e-3, False)

    def strided(x, buf):  # the statistics as views of one buffer (every other element)
        return F.batch_norm(x, buf[0::2], buf[1::2], training=True)

    tol = _tol(dtype)
    check(f, lambda: (r(4, 3, 5, 2, dtype=dtype), r(3, dtype=dtype), r(3, dtype=dtype, lo=0.5, hi=2)), tol=tol)
    check(f, lambda: (r(6, 5, 7, dtype=dtype).transpose(0, 2).contiguous().transpose(0, 2), r(5, dtype=dtype),
                      r(5, dtype=dtype, lo=0.5, hi=2)), tol=tol)  # non-contiguous input, rank 3
    if dtype in (torch.bfloat16, torch.float16):
        check(f, lambda: (r(4, 3, 5, dtype=dtype), r(3), r(3, lo=0.5, hi=2)), tol=tol)  # float32 statistics
    check(aten, lambda: (r(5, 4, 3, 3, dtype=dtype), r(4, dtype=dtype), r(4, dtype=dtype, lo=0.5, hi=2), r(4, dtype=dtype),
                         r(4, dtype=dtype)), tol=tol)
    check(strided, lambda: (r(8, 3, dtype=dtype), r(6, dtype=dtype, lo=0.5, hi=2)), tol=tol)


def test_batch_norm_modules_in_training_mode():
    """BatchNorm modules left in training mode (a model called without .eval(), under no_grad): one graph
    updating each module's running statistics and num_batches_tracked as eager does, call after call;
    momentum=None's cumulative average reads num_batches_tracked's value (a break, eager's values)."""
    def make(momentum):
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=momentum), nn.ReLU(), nn.Flatten(2),
                             nn.BatchNorm1d(4)).train()

    for momentum, graphs in ((0.1, 1), (None, None)):
        m, ref = make(momentum), make(momentum)
        c = pt2.compile(m)
        with torch.no_grad():
            for i in range(3):  # the statistics move on each call
                x = r(2, 3, 7, 6, seed=i)
                compare(c(x), ref(x), 1e-5)
        compare(list(m.state_dict().values()), list(ref.state_dict().values()), 1e-5, "the modules' buffers")
        if graphs:
            assert counts(make(momentum), r(2, 3, 7, 6))[:2] == (graphs, 0)


class _Instantiator(__import__("collections").OrderedDict):
    """transformers' ClassInstantier (ACT2FN): its own __getitem__ makes an instance of the class the
    item holds, through super().__getitem__."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


_ACTIVATIONS = _Instantiator({"relu": nn.ReLU, "leaky": (nn.LeakyReLU, {"negative_slope": 0.25})})


@pytest.mark.parametrize("key", ["relu", "leaky"])
def test_item_of_a_dict_with_its_own_getitem_fetched_by_dicts_lookup(key):
    """A break inside such a __getitem__ (nn.Module's constructor) resumes with the item read again
    by dict.__getitem__, as the trace read it: base[key] would run the subclass's __getitem__ again,
    which broke again, down to a RecursionError (Mamba in transformers 5)."""
    def fn(x):
        act = _ACTIVATIONS[key]
        return act(x * 2) + 1

    run_both(fn, lambda: (r(5, 7),))


class _Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(5, 5), "bb": nn.Linear(5, 3)})
        self.layers = nn.ModuleList([nn.Linear(5, 5) for _ in range(4)])
        self.seq = nn.Sequential(nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 5), nn.Tanh())


def test_module_dict_iterates_its_keys():
    """`for k in module_dict` yields the keys (nn.ModuleDict.__iter__), not the modules: a loop
    that used its keys got the children (len(child) == 0) and gave zeros."""
    m = _Containers()

    def fn(x):
        n, out = 0, []
        for k in m.heads:
            n += len(k)
            out.append(m.heads[k](x))
        return x * n, out, len(m.heads), list(m.heads)

    run_both(fn, lambda: (r(3, 5),))


def test_module_list_slices():
    """`for layer in self.layers[:n]` (Llama's decoder loop), negative and stepped slices, a slice of
    a slice, len, and isinstance/type of the slice (a ModuleList, as eager's)."""
    m = _Containers()

    def fn(x):
        for layer in m.layers[: len(m.layers) - 1]:
            x = torch.relu(layer(x))
        for layer in m.layers[::-2][:1]:
            x = layer(x)
        part = m.layers[1:3]
        return x, len(part), isinstance(part, nn.ModuleList), type(part) is nn.ModuleList, isinstance(part, list)

    run_both(fn, lambda: (r(3, 5),))


def test_sequential_slice_called():
    """`self.seq[:k](x)`: each module of the slice on the last one's result, as Sequential.forward."""
    m = _Containers()
    run_both(lambda x: m.seq[:3](x) + m.seq[-1:](x) + m.seq[1](x), lambda: (r(3, 5),))


class _OwnItems(nn.Module):
    """A module whose class subscripts and iterates its own way."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 5))
        self.lin = nn.Linear(5, 5)

    def __getitem__(self, i):
        return self.w[i]

    def __iter__(self):
        return iter(self.w)


def test_module_with_its_own_getitem_and_iter_keeps_eagers_results():
    """Not read as a container of children (its _modules): eager's values (after a break)."""
    m = _OwnItems()

    def fn(x):
        return x * m[1] + sum(row for row in m)

    run_both(fn, lambda: (r(3, 5),))


def test_bool_of_containers_and_environment_reads():
    """bool(dict), bool(list) as `if` decides them, and os.environ.get (transformers reads flags in
    its forwards: a dict keyed by bytes underneath) without a break."""
    import os

    def fn(x, d, xs):
        flag = os.environ.get("PT2_TEST_FLAG_UNSET", "0") == "1"
        return x * (2 if bool(d) else 3) + (1 if bool(xs) else -1) + (5 if flag else 0)

    run_both(fn, lambda: (r(3, 5), {"k": 1}, []))
    run_both(fn, lambda: (r(3, 5), {}, [1]))
    pt2.reset()
    info = pt2.explain(fn)(r(3, 5), {"k": 1}, [])
    assert info.graph_break_count == 0, info.break_reasons
    # the variable set, changed, removed between calls: each call reads it as eager does
    compiled, x = pt2.compile(fn), r(3, 5)
    try:
        for value in ["1", "0", "1", None]:
            if value is None:
                del os.environ["PT2_TEST_FLAG_UNSET"]
            else:
                os.environ["PT2_TEST_FLAG_UNSET"] = value
            torch.testing.assert_close(compiled(x, {}, []), fn(x, {}, []))
    finally:
        os.environ.pop("PT2_TEST_FLAG_UNSET", None)


def test_module_containers_follow_without_breaks():
    m = _Containers()

    def fn(x):
        for layer in m.layers[:3]:
            x = layer(x)
        for k in m.heads:
            x = x + m.heads[k](x).sum()
        return m.seq[:2](x)

    pt2.reset()
    with torch.no_grad():
        info = pt2.explain(fn)(r(3, 5))
    assert info.graph_break_count == 0, info.break_reasons
