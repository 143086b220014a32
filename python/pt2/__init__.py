"""pt2: PyTorch 2's torch.compile, rebuilt as an MLIR compiler pipeline in C.

The capture frontend (pt2.compile, pt2.explain) is being built in capture/;
today this package exposes the compiler core through its C API:

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

__all__ = ["Graph", "Kernel", "Context", "Pt2Error", "catalog", "compile_text", "DTYPES"]
