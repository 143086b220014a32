"""The guards' version-tag fast path (capture/guard_tags.c, docs/capture.md "Guards").

Every scenario runs twice, with the fast path and with PT2_DISABLE=guard-tags: each call's result
must match eager PyTorch, and the two runs must compile and reuse entries alike (the same cache
sizes after every call), with the fast path really taken on the first run.  Between calls the
scenarios change what a snapshot could have cached: module attributes, parameters, tensor
metadata, hooks, submodules, globals, class attributes, __class__, lists, dicts, closure cells.
"""
import collections
import os
import types

import pytest
import torch
import torch.nn as nn

import pt2
from pt2 import _C


class Runner:
    """Calls a compiled callable beside eager, logging the cache size of `code` and whether a
    check took the fast path during the call."""

    def __init__(self, fn, code):
        self.fn, self.code = fn, code
        self.compiled = pt2.compile(fn)
        self.log = []

    def __call__(self, *args, eager=None):
        before = _C.guard_stats()["fast"]
        out = self.compiled(*args)
        fast = _C.guard_stats()["fast"] > before
        ref = (eager or self.fn)(*args)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        self.log.append((_C.cache_size(self.code), fast))
        return out


def run_both(scenario):
    """scenario(make_runner) in both modes; the fast path's cache sizes match the slow path's."""
    saved = os.environ.get("PT2_DISABLE")
    logs = {}
    try:
        for mode in ("tags", "no-tags"):
            os.environ["PT2_DISABLE"] = "" if mode == "tags" else "guard-tags"
            pt2.reset()
            runners = []

            def make(fn, code=None):
                r = Runner(fn, code or (type(fn).forward.__code__ if isinstance(fn, nn.Module) else fn.__code__))
                runners.append(r)
                return r

            torch.manual_seed(0)
            with torch.no_grad():
                scenario(make)
            logs[mode] = [entry for r in runners for entry in r.log]
    finally:
        if saved is None:
            os.environ.pop("PT2_DISABLE", None)
        else:
            os.environ["PT2_DISABLE"] = saved
        pt2.reset()
    sizes = {m: [s for s, _ in log] for m, log in logs.items()}
    assert sizes["tags"] == sizes["no-tags"]
    assert not any(f for _, f in logs["no-tags"])
    assert any(f for _, f in logs["tags"]), "the fast path was never taken"
    return logs["tags"]


x = torch.randn(3, 4)


def test_training_flag():
    class M(nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x * 3

    def scenario(make):
        m = M().eval()
        r = make(m)
        r(x), r(x)
        m.train()
        r(x), r(x)
        m.eval()
        r(x), r(x)

    log = run_both(scenario)
    assert log[1][1] and log[-1][1]


def test_python_int_hyperparameter():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2

        def forward(self, x):
            return x * self.k + 1

    def scenario(make):
        m = M()
        r = make(m)
        r(x), r(x)
        m.k = 3
        r(x), r(x)
        m.k = 2
        r(x)

    run_both(scenario)


class WithParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.sub = nn.Linear(4, 4)

    def forward(self, x):
        return self.sub(x @ self.w)


def test_parameter_replaced():
    def scenario(make):
        m = WithParam()
        r = make(m)
        r(x), r(x)
        m.w = nn.Parameter(torch.randn(4, 4))  # same shape: another tensor, read anew
        r(x), r(x)
        m.sub = nn.Linear(4, 4)
        r(x)
        m.w = nn.Parameter(torch.randn(4, 4).t())  # other strides: recompiled
        r(x), r(x)
        m.sub.weight = nn.Parameter(torch.randn(4, 4).t())  # a deep one, other strides
        r(x), r(x)

    run_both(scenario)


def test_tensor_metadata_changed_in_place():
    def scenario(make):
        m = WithParam()
        r = make(m)
        r(x), r(x)
        m.w.data = torch.randn(4, 4).t().contiguous().t()  # .data of other strides
        r(x), r(x)
        m.sub.bias.data = torch.randn(4)
        r(x)
        m.w.requires_grad_(False)
        r(x), r(x)
        m.w.requires_grad_(True)
        r(x)
        m.sub.weight.mul_(2)  # an in-place update: read anew, nothing recompiled
        r(x)

    run_both(scenario)


def test_forward_hook_registered_and_removed():
    def scenario(make):
        m = WithParam()
        r = make(m)
        r(x), r(x)
        h = m.sub.register_forward_hook(lambda mod, args, out: out * 2)
        r(x), r(x)
        h.remove()
        r(x), r(x)

    run_both(scenario)


def test_global_forward_hook():
    """A global module hook (register_module_forward_hook) registered after the compile: the
    guard on torch's global hook dicts fails, the recompile breaks at the module call and eager
    runs the hook; removed, the compiled graph is back."""
    m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m)
        torch.testing.assert_close(c(x), m(x))
        h = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: out + 1)
        try:
            torch.testing.assert_close(c(x), m(x))
            torch.testing.assert_close(c(x), m(x))
        finally:
            h.remove()
        torch.testing.assert_close(c(x), m(x))
        pre = torch.nn.modules.module.register_module_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        try:
            torch.testing.assert_close(c(x), m(x))
        finally:
            pre.remove()
        torch.testing.assert_close(c(x), m(x))


def test_submodule_replaced():
    def scenario(make):
        m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4), nn.Tanh()))
        r = make(m)
        r(x), r(x)
        m[2][1] = nn.Sigmoid()
        r(x), r(x)
        m[0] = nn.Linear(4, 4)
        r(x)
        del m[1]
        r(x), r(x)

    run_both(scenario)


SCALE = 2.0
cfgmod = types.ModuleType("cfgmod")
cfgmod.scale = 1.5


def scaled(x):
    return x * SCALE + cfgmod.scale


def test_global_and_module_attribute_changed():
    global SCALE

    def scenario(make):
        global SCALE
        r = make(scaled)
        r(x), r(x)
        SCALE = 3.0
        r(x), r(x)
        cfgmod.scale = -1.0
        r(x), r(x)
        SCALE, cfgmod.scale = 2.0, 1.5

    try:
        run_both(scenario)
    finally:
        SCALE, cfgmod.scale = 2.0, 1.5


class Scaled(nn.Module):
    factor = 2.0

    def forward(self, x):
        return x * self.factor + self.offset()

    def offset(self):
        return 1.0


class Scaled2(Scaled):
    def offset(self):
        return -4.0


def test_class_attribute_and_class_changed():
    def scenario(make):
        Scaled.factor = 2.0
        m = Scaled()
        r = make(m)
        r(x), r(x)
        Scaled.factor = 5.0  # the class's version tag moves
        r(x), r(x)
        m.__class__ = Scaled2  # the instance's type, nothing in a dict
        r(x), r(x)
        m.__class__ = Scaled
        r(x)
        m.factor = 7.0  # now shadowed by the instance dict
        r(x), r(x)

    try:
        run_both(scenario)
    finally:
        Scaled.factor = 2.0


def test_list_and_dict_attributes_mutated():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = [1.0, 2.0]
            self.cfg = {"a": 1.0}
            self.order = collections.OrderedDict([("p", 1.0), ("q", 3.0)])

        def forward(self, x):
            y = x * self.scales[0] + self.scales[1] + self.cfg["a"]
            if "b" in self.cfg:
                y = y - self.cfg["b"]
            for k, v in self.order.items():
                y = y * 2 - v
            return y

    def scenario(make):
        m = M()
        r = make(m)
        r(x), r(x)
        m.scales[0] = 5.0  # in place: lists have no tag, their guards run
        r(x), r(x)
        m.cfg["b"] = 2.0  # a key added
        r(x), r(x)
        m.cfg["a"] = 4.0
        r(x)
        m.order.move_to_end("p")  # an OrderedDict's order: no dict tag moves
        r(x), r(x)
        m.order["q"] = 0.5
        r(x)

    run_both(scenario)


def test_closure_cell_changed():
    def make_fn():
        k = 2.0

        def f(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v

        return f, set_k

    def scenario(make):
        f, set_k = make_fn()
        r = make(f)
        r(x), r(x)
        set_k(3.0)
        r(x), r(x)

    run_both(scenario)


def test_attribute_written_every_call_keeps_the_fast_path():
    """forward stores self.last (never read): the module's dict tag moves every call; the reads
    that consulted that dict are re-validated (the same objects) instead of failing the snapshot."""

    class Storing(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.last = None

        def forward(self, x):
            self.last = x.shape[0] * 10
            return self.lin(x) * 2

    def scenario(make):
        m = Storing()
        r = make(m)
        for i in range(6):
            m.last = i  # eager and compiled both store
            r(x, eager=lambda v: m.lin(v) * 2)
            assert m.last == 30

    log = run_both(scenario)
    assert all(f for _, f in log[1:])


def test_fresh_arguments_every_call():
    """A tuple argument made anew every call is a root that changes: left out of the snapshot after
    it differs twice, and the fast path is taken from then on."""

    def f(xs, cfg):
        return xs[0] * cfg["k"] + xs[1]

    def scenario(make):
        r = make(f)
        for i in range(8):
            r((torch.randn(3), torch.randn(3)), {"k": 2.0})
        r((torch.randn(3), torch.randn(3)), {"k": 3.0})
        r((torch.randn(3), torch.randn(3), torch.randn(3)), {"k": 3.0})

    log = run_both(scenario)
    assert all(f for _, f in log[4:8])


def test_instance_dict_shadows_and_is_replaced():
    class Cfg:
        def __init__(self):
            self.k = 2.0

    cfg = Cfg()

    def g(x):
        return x * cfg.k

    def scenario(make):
        cfg.__dict__ = {"k": 2.0}
        m = WithParam()
        r = make(m)
        r(x), r(x)
        m.__dict__["w"] = torch.randn(4, 4)  # shadows _parameters['w'], bypassing __setattr__
        r(x), r(x)
        del m.__dict__["w"]
        r(x), r(x)
        rg = make(g)
        rg(x), rg(x)
        cfg.__dict__ = {"k": 5.0}  # another instance dict: its tag says nothing about the old one
        rg(x), rg(x)

    run_both(scenario)


def test_many_submodules_skip_most_guards(monkeypatch):
    monkeypatch.setenv("PT2_DISABLE", "")
    blocks = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8)) for _ in range(20)]).eval()
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(blocks)
        v = torch.randn(2, 8)
        c(v)
        _C.guard_stats(True)
        c(v)
        s = _C.guard_stats(True)
        torch.testing.assert_close(c(v), blocks(v))
        _, _, failure = _C.check_guards(type(blocks).forward, (blocks, v))
        info = pt2.explain(blocks)(v)
    assert s["fast"] == 1
    assert failure == ""
    # the tensors (80), the submodules' types and the global state still run; the rest is skipped
    assert s["guards_run"] < len(info.out_guards) / 2


class Base(nn.Module):
    shift = 1.0


class Derived(Base):
    def __init__(self):
        super().__init__()
        self._scale = [2.0]

    @property
    def scale(self):
        return self._scale[0]

    def forward(self, x):
        return x * self.scale + self.shift


def test_base_class_attribute_and_property():
    """A change on a base class moves the subclass's tag (the lookup is along the MRO); a property
    is not decided by tags: what it reads is guarded and checked every call."""

    def scenario(make):
        Base.shift = 1.0
        if "shift" in Derived.__dict__:
            del Derived.shift
        m = Derived()
        r = make(m)
        r(x), r(x)
        Base.shift = -2.0
        r(x), r(x)
        m._scale[0] = 3.0
        r(x), r(x)
        Derived.shift = 0.5  # now found on the subclass first
        r(x), r(x)

    try:
        run_both(scenario)
    finally:
        Base.shift = 1.0
        if "shift" in Derived.__dict__:
            del Derived.shift


def test_alternating_entries_and_restored_objects():
    """Two entries (two shapes) both keep their snapshots; a parameter deleted and put back (the
    same object) re-validates."""

    def scenario(make):
        m = WithParam()
        r = make(m)
        a, b = torch.randn(3, 4), torch.randn(5, 4)
        for _ in range(3):
            r(a), r(b)
        w = m.w
        del m.w
        m.w = w
        r(a), r(b), r(a)
        m.register_buffer("extra", torch.ones(1))  # a new buffer: _buffers' tag moves, nothing read changes
        r(a), r(b)

    log = run_both(scenario)
    assert all(f for _, f in log[2:])


def test_hook_on_the_compiled_wrapper_runs():
    """A hook registered on what pt2.compile returned runs (once), as on torch.compile's
    OptimizedModule; the wrapped module's own hook runs once too."""
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m)
        want = m(x)
        h = c.register_forward_hook(lambda mod, args, out: out * 3)
        try:
            torch.testing.assert_close(c(x), want * 3)
        finally:
            h.remove()
        h = m.register_forward_hook(lambda mod, args, out: out - 1)
        try:
            torch.testing.assert_close(c(x), m(x))
            torch.testing.assert_close(c(x), want - 1)
        finally:
            h.remove()
        torch.testing.assert_close(c(x), want)
