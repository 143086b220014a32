"""pt2.compile, pt2.explain and pt2.reset: the user-facing capture API.

The work happens in C (pt2._C, capture/): a PEP 523 frame hook intercepts
the frames of the compiled function, evaluates their bytecode symbolically,
compiles the captured graph with libpt2, and runs the cached native code on
later calls whose guards pass.

The device follows the tensors: a graph traced on CPU tensors is a native CPU
kernel, one traced on CUDA tensors is compiled for that GPU (docs/gpu.md) and
launched on torch.cuda.current_stream(); tensor guards include the device, so
calling the same function on CPU and on CUDA compiles one entry for each.
mode="reduce-overhead" replays each GPU graph as a CUDA graph.

freeze=True (implied by mode="max-autotune"): module parameters and buffers
are constants of the compiled CPU graphs (docs/capture.md, "Freezing").
"""
import functools
import inspect
import os

import torch

from . import _C

Unsupported = _C.Unsupported

_BACKENDS = ("cpu", "pt2")  # the name is historical: the device follows the tensors
_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

if "PT2_RECOMPILE_LIMIT" in os.environ:
    _C.set_recompile_limit(int(os.environ["PT2_RECOMPILE_LIMIT"]))


def _freezes(mode, freeze):
    """freeze=None follows the mode: the max-autotune modes freeze, as Inductor's freezing."""
    return mode.startswith("max-autotune") if freeze is None else bool(freeze)


def _check_options(fullgraph, dynamic, mode, backend):
    if backend not in _BACKENDS:
        raise ValueError(f"pt2.compile: unknown backend {backend!r} (available: {', '.join(_BACKENDS)})")
    if mode not in _MODES:
        raise ValueError(f"pt2.compile: unknown mode {mode!r} (available: {', '.join(_MODES)})")
    if dynamic:
        raise NotImplementedError("pt2.compile(dynamic=True): dynamic shapes are not supported yet; shapes are specialized and guarded")


class CompiledFunction:
    """A function whose calls run through pt2's frame hook."""

    def __init__(self, fn, fullgraph=False, mode="default", freeze=None):
        self._fn = fn
        self._fullgraph = fullgraph
        self._cudagraphs = mode == "reduce-overhead"
        self._freeze = _freezes(mode, freeze)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return _C.run(self._fn, args, kwargs, self._fullgraph, None, getattr(self._fn, "__code__", None), self._cudagraphs, self._freeze)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)


def _forward_code(module):
    """The code object of a module's forward (compiled even for torch.nn's own modules)."""
    fwd = getattr(type(module), "forward", None)
    return getattr(fwd, "__code__", None)


class CompiledModule(torch.nn.Module):
    """Wraps an nn.Module so that its forward is compiled (like torch.compile's OptimizedModule)."""

    def __init__(self, module, fullgraph=False, mode="default", freeze=None):
        super().__init__()
        self._orig_mod = module
        self._fullgraph = fullgraph
        self._cudagraphs = mode == "reduce-overhead"
        self._freeze = _freezes(mode, freeze)

    def forward(self, *args, **kwargs):
        return _C.run(self._orig_mod, args, kwargs, self._fullgraph, None, _forward_code(self._orig_mod), self._cudagraphs,
                      self._freeze)

    def __call__(self, *args, **kwargs):
        # The wrapper is not a module of the user's program: torch's global module
        # hooks (register_module_forward_hook) run for the wrapped module as in eager,
        # not a second time for the wrapper.  Hooks registered on the wrapper itself run.
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks:
            return super().__call__(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)


def compile(model=None, *, fullgraph=False, dynamic=None, mode="default", backend="cpu", options=None, freeze=None):
    """Compile a function or nn.Module with pt2 (same shape as torch.compile).

    Usable as `pt2.compile(fn)`, `@pt2.compile` or `@pt2.compile(fullgraph=True)`.
    The first call captures and compiles; later calls whose guards pass run the
    cached native code.  Anything pt2 cannot capture runs eagerly (with
    fullgraph=True it raises pt2.Unsupported naming the construct and line).

    Graphs traced on CUDA tensors run on the GPU.  mode="reduce-overhead"
    records each such graph as a CUDA graph at its first call and replays it
    afterwards: inputs whose address stays the same (parameters) are read in
    place, inputs that move are copied into static buffers, and outputs are
    returned as fresh tensors (copies of the graph's static outputs).  CPU
    graphs ignore that mode.

    freeze=True treats the parameters and buffers of modules as constants
    of CPU graphs (inference): batch norms fold into convolution weights and
    what is computed from weights alone runs once.  Each frozen tensor is
    guarded by identity, data pointer and version counter, so replacing it
    or changing it in place recompiles; changes through `.data` bypass the
    version counter (call pt2.reset() after them).  Parameters that require
    grad under grad mode run eagerly as always.  mode="max-autotune" (and
    "max-autotune-no-cudagraphs") implies freeze=True unless freeze=False.
    """
    _check_options(fullgraph, dynamic, mode, backend)
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, mode=mode, backend=backend, options=options, freeze=freeze)
    if isinstance(model, torch.nn.Module):
        return CompiledModule(model, fullgraph, mode, freeze)
    if not callable(model):
        raise TypeError(f"pt2.compile expects a function or an nn.Module, got {type(model).__name__}")
    return CompiledFunction(model, fullgraph, mode, freeze)


def disable(fn=None, *, recursive=True):
    """Keeps fn out of pt2, as torch.compiler.disable does: usable as a decorator.

    Called from compiled code, fn is a graph break: the graph so far runs, fn runs in
    CPython, capture resumes after it.  With recursive=True (the default) nothing fn
    calls is captured either; with recursive=False only fn's own frames are skipped
    and the functions it calls are compiled as usual.
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if not recursive:
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        if code is None:
            raise TypeError(f"pt2.disable(recursive=False) needs a Python function, not {type(fn).__name__}")
        _C.disable_code(code)
        return fn

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        return _C.call_without_hook(fn, args, kwargs)

    return disabled


# every wrapper disable() makes shares this one code object: never intercepted, never inlined
_C.disable_code(disable(len).__code__)


def reset():
    """Drop every compiled frame (the on-disk kernel cache is kept)."""
    _C.reset()


class BreakReason:
    def __init__(self, reason, filename, lineno):
        self.reason = reason
        self.filename = filename
        self.lineno = lineno

    @property
    def user_stack(self):
        return [f"{self.filename}:{self.lineno}"]

    def __repr__(self):
        return f"{self.reason} ({self.filename}:{self.lineno})"


class ExplainOutput:
    """What pt2 captured (field names as torch._dynamo.explain)."""

    def __init__(self, records, out):
        self.records = records
        self.graphs = [r["graph"] for r in records if r["graph"]]
        self.graph_count = len(self.graphs)
        self.break_reasons = [BreakReason(r["break"]["reason"], r["break"]["filename"], r["break"]["lineno"]) for r in records if "break" in r]
        self.graph_break_count = len(self.break_reasons)
        self.ops_per_graph = [r["ops"] for r in records if r["graph"]]
        self.op_count = sum(self.ops_per_graph)
        self.out_guards = [g for r in records for g in r.get("guards", [])]
        self.compile_times = [r["compile_seconds"] for r in records if r["graph"]]
        self.result = out

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}", f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [f"  {i + 1}. {b}" for i, b in enumerate(self.break_reasons)]
        return "\n".join(lines)


def explain(fn, *extra_args, **extra_kwargs):
    """pt2.explain(fn)(*args, **kwargs) -> ExplainOutput (graphs, breaks, guards)."""

    def run(*args, **kwargs):
        reset()
        records = []
        target = fn._orig_mod if isinstance(fn, CompiledModule) else fn._fn if isinstance(fn, CompiledFunction) else fn
        force = _forward_code(target) if isinstance(target, torch.nn.Module) else getattr(target, "__code__", None)
        freeze = getattr(fn, "_freeze", False)  # a compiled object's own freezing (FROZEN guards)
        out = _C.run(target, args, kwargs, False, records, force, False, freeze)
        reset()
        return ExplainOutput(records, out)

    if extra_args or extra_kwargs:
        return run(*extra_args, **extra_kwargs)
    return run


def _dynamo_backend(gm, example_inputs, mode=None, options=None):
    """torch.compile(m, backend="pt2"): Dynamo hands over an FX GraphModule, whose
    generated forward pt2 captures and compiles like any other function (on
    the GPU when the example inputs are CUDA tensors).  torch.compile(...,
    backend="pt2", mode="reduce-overhead") replays CUDA graphs."""
    mode = mode or (options or {}).get("mode") or "default"
    if mode not in _MODES:
        raise ValueError(f"pt2 backend: unknown mode {mode!r} (available: {', '.join(_MODES)})")
    try:  # a lazily generated GraphModule: make its real forward now (not the recompiling stub)
        from torch.fx._lazy_graph_module import _LazyGraphModule

        if isinstance(gm, _LazyGraphModule):
            gm.real_recompile()
    except ImportError:
        pass
    # Dynamo passes the parameters to its graph module as arguments (they are
    # no module's attributes there), so a frozen graph finds none to freeze
    compiled = CompiledFunction(gm.forward, mode=mode)

    def run(*args):
        out = compiled(*args)
        # Dynamo's calling convention returns a tuple/list of outputs
        return out

    return run


def register_torch_backend():
    """Registers "pt2" with torch.compile (done when pt2 is imported)."""
    try:
        from torch._dynamo.backends.registry import _BACKENDS, register_backend
    except ImportError:  # a torch without Dynamo: nothing to register
        return
    if "pt2" not in _BACKENDS:
        register_backend(compiler_fn=_dynamo_backend, name="pt2")
