"""ctypes binding of libpt2's public C API (include/pt2.h).

This is the thin layer the tests, examples and benchmarks use to build pt2
graphs, compile them and call them on torch tensors.  The capture frontend
(capture/) talks to the same C API from C.
"""
import ctypes
import math
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    env = os.environ.get("PT2_LIBRARY")
    candidates = [env] if env else []
    candidates += [
        os.path.join(_HERE, "libpt2.so"),
        os.path.join(_HERE, "..", "..", "build", "lib", "libpt2.so"),
    ]
    for c in candidates:
        if c and os.path.exists(c):
            return os.path.abspath(c)
    raise ImportError("libpt2.so not found: run `make` at the repository root, or set PT2_LIBRARY")


_lib = ctypes.CDLL(_find_library())


def _torch_empty(shape, dtype):
    return torch.empty(shape, dtype=dtype)


def _empty(shape, dtype):
    """A new output: pt2._C.empty (large ones from pt2's pool of recycled memory, capture/outpool.c)
    when the capture module is built, else torch.empty."""
    global _empty
    try:
        from . import _C

        _empty = _C.empty
    except ImportError:
        _empty = _torch_empty
    return _empty(shape, dtype)
_I64P = ctypes.POINTER(ctypes.c_int64)
_IP = ctypes.POINTER(ctypes.c_int)


def _sig(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_sig("pt2GetLastError", ctypes.c_char_p)
_sig("pt2GetLastErrorKind", ctypes.c_int)
_sig("pt2ContextCreate", ctypes.c_void_p)
_sig("pt2ContextDestroy", None, ctypes.c_void_p)
_sig("pt2GraphCreate", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)
_sig("pt2GraphDestroy", None, ctypes.c_void_p)
_sig("pt2GraphAddInput", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, _I64P)
_sig("pt2GraphAddScalar", ctypes.c_int, ctypes.c_void_p, ctypes.c_double, ctypes.c_int, ctypes.c_int)
_sig("pt2GraphAddConstant", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, _I64P, ctypes.c_void_p)
_sig("pt2GraphAddOp", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, _IP, ctypes.c_char_p, _IP, ctypes.c_int)
_sig("pt2GraphSetOutputs", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, _IP)
_sig("pt2GraphSetInputFrozen", ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_sig("pt2GraphSetEagerDevice", None, ctypes.c_void_p, ctypes.c_int)
_sig("pt2GraphSetLocation", None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int)
_sig("pt2GraphValueType", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, _IP, _I64P)
_sig("pt2GraphToText", ctypes.c_void_p, ctypes.c_void_p)
_sig("pt2Free", None, ctypes.c_void_p)
_sig("pt2CompileText", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
_sig("pt2CompileGraph", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_sig("pt2KernelDestroy", None, ctypes.c_void_p)
_sig("pt2KernelNumInputs", ctypes.c_int, ctypes.c_void_p)
_sig("pt2KernelNumOutputs", ctypes.c_int, ctypes.c_void_p)
_sig("pt2KernelArgType", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, _IP, _I64P)
_sig("pt2KernelFromCache", ctypes.c_int, ctypes.c_void_p)
_sig("pt2KernelCompileSeconds", ctypes.c_double, ctypes.c_void_p)
_sig("pt2KernelRunPointers", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_sig("pt2KernelInputIsFrozen", ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_sig("pt2KernelHasPrologue", ctypes.c_int, ctypes.c_void_p)
_sig("pt2KernelResetFrozen", None, ctypes.c_void_p)


class _Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("rank", ctypes.c_int), ("sizes", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


_sig("pt2KernelRun", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Buffer), ctypes.POINTER(_Buffer))
_sig("pt2CatalogSize", ctypes.c_int)
for _n in ("pt2CatalogOpName", "pt2CatalogOpAttrs", "pt2CatalogOpTorch", "pt2CatalogOpSummary"):
    _sig(_n, ctypes.c_char_p, ctypes.c_int)
_sig("pt2CatalogOpIsComposite", ctypes.c_int, ctypes.c_int)
_sig("pt2CatalogOpArity", ctypes.c_int, ctypes.c_int, _IP, _IP)


def _arity(i):
    n_in, n_out = ctypes.c_int(), ctypes.c_int()
    _lib.pt2CatalogOpArity(i, ctypes.byref(n_in), ctypes.byref(n_out))
    return n_in.value, n_out.value


class Pt2Error(RuntimeError):
    """An error reported by libpt2 (bad graph, unsupported op or dtype, compile failure)."""


def _error(what):
    return Pt2Error(f"{what}: {_lib.pt2GetLastError().decode(errors='replace')}")


_PT2_ERROR_INDEX = 1  # Pt2ErrorKind (include/pt2.h)


def _run_error():
    """A failed kernel run as eager's error: IndexError for an index out of
    range in x[idx], index_select or embedding, else RuntimeError (gather's)."""
    message = _lib.pt2GetLastError().decode(errors="replace")
    if _lib.pt2GetLastErrorKind() == _PT2_ERROR_INDEX:
        return IndexError(message)
    return Pt2Error(f"running the kernel: {message}")


# Pt2DType order (include/pt2.h)
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int8, torch.bool, torch.int16, torch.uint8]
_DT_INDEX = {dt: i for i, dt in enumerate(DTYPES)}
_MLIR_NAMES = ["f32", "f16", "bf16", "f64", "i64", "i32", "i8", "i1", "i16", "ui8"]


def dtype_code(dt):
    try:
        return _DT_INDEX[dt]
    except KeyError:
        raise Pt2Error(f"pt2 does not support dtype {dt} (supported: {', '.join(str(d) for d in DTYPES)})") from None


def mlir_type_name(dt):
    return _MLIR_NAMES[dtype_code(dt)]


def catalog():
    """The op catalog: a list of dicts with name, attrs, torch, summary, composite."""
    return [
        dict(
            name=_lib.pt2CatalogOpName(i).decode(),
            attrs=_lib.pt2CatalogOpAttrs(i).decode(),
            torch=_lib.pt2CatalogOpTorch(i).decode(),
            summary=_lib.pt2CatalogOpSummary(i).decode(),
            composite=bool(_lib.pt2CatalogOpIsComposite(i)),
            n_operands=_arity(i)[0],
            n_results=_arity(i)[1],
        )
        for i in range(_lib.pt2CatalogSize())
    ]


def _float_text(v):
    if math.isnan(v):
        return "0x7FF8000000000000 : f64"
    if math.isinf(v):
        return ("0xFFF0000000000000" if v < 0 else "0x7FF0000000000000") + " : f64"
    text = repr(float(v))
    if "." not in text:  # MLIR float literals need a '.' in the mantissa: 1e-05 -> 1.0e-05
        mant, _, exp = text.partition("e")
        text = f"{mant}.0" + (f"e{exp}" if exp else "")
    return f"{text} : f64"


def format_attr(v):
    """A Python value as MLIR attribute text, as the catalog's attribute types expect."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v} : i64"
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, torch.dtype):
        return mlir_type_name(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        if not v:
            return "array<i64>"
        return "array<i64: " + ", ".join(str(int(x)) for x in v) + ">"
    raise Pt2Error(f"cannot express attribute value {v!r} ({type(v).__name__})")


def format_attrs(attrs):
    items = [f"{k} = {format_attr(v)}" for k, v in attrs.items() if v is not None]
    return "{" + ", ".join(items) + "}" if items else ""


class Context:
    _default = None

    def __init__(self):
        self.handle = _lib.pt2ContextCreate()
        if not self.handle:
            raise _error("creating the pt2 context")

    @classmethod
    def default(cls):
        if cls._default is None:
            cls._default = Context()
        return cls._default


class Graph:
    """Builds one pt2 function through the C graph builder."""

    def __init__(self, name="main", context=None):
        self.context = context or Context.default()
        self.handle = _lib.pt2GraphCreate(self.context.handle, name.encode())

    def __del__(self):
        if getattr(self, "handle", None):
            _lib.pt2GraphDestroy(self.handle)
            self.handle = None

    def input(self, dtype, shape):
        sizes = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        v = _lib.pt2GraphAddInput(self.handle, dtype_code(dtype), len(shape), sizes)
        if v < 0:
            raise _error("graph input")
        return v

    def scalar(self, value, dtype=None, weak=True):
        if dtype is None:
            dtype = torch.bool if isinstance(value, bool) else torch.int64 if isinstance(value, int) else torch.get_default_dtype()
        v = _lib.pt2GraphAddScalar(self.handle, float(value), dtype_code(dtype), int(weak))
        if v < 0:
            raise _error("graph scalar")
        return v

    def constant(self, tensor):
        t = tensor.detach().contiguous().cpu()
        sizes = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
        v = _lib.pt2GraphAddConstant(self.handle, dtype_code(t.dtype), t.dim(), sizes, ctypes.c_void_p(t.data_ptr()))
        if v < 0:
            raise _error("graph constant")
        return v

    def set_eager_device(self, device):
        """Whose eager kernels the graph follows where the devices differ: "cpu" (the default) or "cuda"."""
        _lib.pt2GraphSetEagerDevice(self.handle, int(torch.device(device).type == "cuda"))

    def set_location(self, file, line, col=0):
        _lib.pt2GraphSetLocation(self.handle, file.encode() if file else None, line, col)

    def op(self, name, *operands, **attrs):
        ops = (ctypes.c_int * max(len(operands), 1))(*operands)
        results = (ctypes.c_int * 4)()
        n = _lib.pt2GraphAddOp(self.handle, name.encode(), len(operands), ops, format_attrs(attrs).encode(), results, 4)
        if n < 0:
            raise _error(f"pt2.{name}")
        return results[0] if n == 1 else tuple(results[i] for i in range(n))

    def value_type(self, v):
        dt = ctypes.c_int()
        sizes = (ctypes.c_int64 * 8)()
        r = _lib.pt2GraphValueType(self.handle, v, ctypes.byref(dt), sizes)
        if r < 0:
            raise _error("value type")
        return DTYPES[dt.value], tuple(sizes[i] for i in range(r))

    def freeze(self, value):
        """Marks input `value` frozen (a constant of the compiled kernel; include/pt2.h)."""
        if _lib.pt2GraphSetInputFrozen(self.handle, value) != 0:
            raise _error("freezing a graph input")

    def outputs(self, *values):
        vals = (ctypes.c_int * max(len(values), 1))(*values)
        if _lib.pt2GraphSetOutputs(self.handle, len(values), vals) != 0:
            raise _error("graph outputs")

    def text(self):
        p = _lib.pt2GraphToText(self.handle)
        if not p:
            raise _error("graph text")
        s = ctypes.string_at(p).decode()
        _lib.pt2Free(p)
        return s

    def compile(self, device="cpu"):
        if torch.device(device).type == "cuda":  # the GPU path (python/pt2/_gpu.py)
            from . import _gpu

            return _gpu.compile_graph(self)
        k = _lib.pt2CompileGraph(self.handle, None)
        if not k:
            raise _error("compiling the graph")
        return Kernel(k)


def compile_text(text, source_name="<text>", func_name=None, context=None, device="cpu"):
    if torch.device(device).type == "cuda":  # the GPU path (python/pt2/_gpu.py)
        from . import _gpu

        return _gpu.compile_text(text, source_name, func_name, context)
    ctx = context or Context.default()
    k = _lib.pt2CompileText(ctx.handle, text.encode(), source_name.encode(), func_name.encode() if func_name else None, None)
    if not k:
        raise _error(f"compiling {source_name}")
    return Kernel(k)


class Kernel:
    """A compiled function; call it with torch tensors, get torch tensors."""

    def __init__(self, handle):
        self.handle = handle
        self.n_inputs = _lib.pt2KernelNumInputs(handle)
        self.n_outputs = _lib.pt2KernelNumOutputs(handle)
        self.arg_types = []
        for i in range(self.n_inputs + self.n_outputs):
            dt = ctypes.c_int()
            sizes = (ctypes.c_int64 * 8)()
            r = _lib.pt2KernelArgType(handle, i, ctypes.byref(dt), sizes)
            self.arg_types.append((DTYPES[dt.value], tuple(sizes[j] for j in range(r))))
        self.from_cache = bool(_lib.pt2KernelFromCache(handle))
        self.compile_seconds = _lib.pt2KernelCompileSeconds(handle)
        self.frozen_inputs = [i for i in range(self.n_inputs) if _lib.pt2KernelInputIsFrozen(handle, i)]
        self.has_prologue = bool(_lib.pt2KernelHasPrologue(handle))
        self._pointers = (ctypes.c_void_p * (self.n_inputs + self.n_outputs))()

    def __del__(self):
        if getattr(self, "handle", None):
            _lib.pt2KernelDestroy(self.handle)
            self.handle = None

    def __call__(self, *inputs):
        if len(inputs) != self.n_inputs:
            raise Pt2Error(f"kernel takes {self.n_inputs} inputs, got {len(inputs)}")
        for i, t in enumerate(inputs):
            dt, shape = self.arg_types[i]
            if t.dtype != dt or tuple(t.shape) != shape:
                raise Pt2Error(f"input {i}: expected {dt} {list(shape)}, got {t.dtype} {list(t.shape)}")
        if not all(t.is_contiguous() for t in inputs):
            return self._run_strided(inputs)
        for i, t in enumerate(inputs):
            self._pointers[i] = t.data_ptr()
        outs = []
        for j in range(self.n_outputs):
            dt, shape = self.arg_types[self.n_inputs + j]
            o = _empty(shape, dt)
            outs.append(o)
            self._pointers[self.n_inputs + j] = o.data_ptr()
        if _lib.pt2KernelRunPointers(self.handle, self._pointers) != 0:
            raise _run_error()
        return outs

    def reset_frozen(self):
        """The frozen inputs changed: the next call computes the prologue again."""
        _lib.pt2KernelResetFrozen(self.handle)

    def _run_strided(self, inputs):
        """Non-contiguous inputs: libpt2 reads them through their strides."""

        def buf(t):
            b = _Buffer()
            b.data = t.data_ptr()
            b.rank = t.dim()
            for d in range(t.dim()):
                b.sizes[d] = t.shape[d]
                b.strides[d] = t.stride(d)
            return b

        ins = (_Buffer * max(self.n_inputs, 1))(*[buf(t) for t in inputs])
        outs = [_empty(shape, dt) for dt, shape in self.arg_types[self.n_inputs:]]
        obufs = (_Buffer * max(self.n_outputs, 1))(*[buf(o) for o in outs])
        if _lib.pt2KernelRun(self.handle, ins, obufs) != 0:
            raise _run_error()
        return outs
