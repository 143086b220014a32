"""pt2: PyTorch 2's torch.compile, rebuilt as an MLIR compiler pipeline in C.

    fast = pt2.compile(model)      # or @pt2.compile on a function
    out = fast(x)                  # capture + compile once, then the cached native code
    print(pt2.explain(model)(x))   # graphs, graph breaks with reasons, guards

The compiler core is also usable directly through its C API:

    g = pt2.Graph()
    x = g.input(torch.float32, (4, 8))
    g.outputs(g.op("softmax", g.op("relu", x), dim=-1))
    kernel = g.compile()
    (y,) = kernel(torch.randn(4, 8))
"""
from ._core import (  # noqa: F401
    DTYPES,
    Context,
    Graph,
    Kernel,
    Pt2Error,
    catalog,
    compile_text,
    format_attr,
    format_attrs,
)

from ._compile import CompiledFunction, CompiledModule, ExplainOutput, Unsupported, compile, disable, explain, reset  # noqa: E402,F401
from ._compile import register_torch_backend as _register_torch_backend  # noqa: E402
from . import _polyfills  # noqa: E402,F401  (loaded before any trace: capture/polyfills.c reads its functions)

_register_torch_backend()

__all__ = ["compile", "disable", "explain", "reset", "Unsupported", "Graph", "Kernel", "Context", "Pt2Error", "catalog", "compile_text", "DTYPES"]
