"""A torch function pt2 has no form for, as one pt2.aten op (dialects/aten.c).

Capture (capture/aten_calls.c) calls `record` with the function, its arguments (the traced tensors
replaced by `Input(k)`) and the tensors' dtypes, sizes and strides.  The function runs on meta
tensors under a TorchDispatchMode that records each aten op it dispatches, and the tensors the
function returns become the op's results.  Its `program` is the one aten op the function's binding
calls (`aten::<its name>`, the overload the arguments pick), every argument in the schema's order:
what eager runs on the CPU, where a composite's C++ branches on the device (meta tensors take
another branch); the recorded calls where there is no such op.  What cannot be one such op is refused with the reason (capture then breaks the graph
as before): a random op (its numbers are eager's generator's), an op that writes into an input or
returns a view of one (the graph's values are fresh tensors), a result whose dtype pt2 has no
tensors of (complex), an argument of a kind the program cannot say (a Generator, a Dimname), a
function whose meta run raises (a data-dependent shape: nonzero, unique; a kernel with no meta
implementation: lstsq)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Input", "record"]


class Input:
    """Operand k of the op: a traced tensor in the arguments capture passes."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


_DTYPES = {
    torch.float32: ("float32", "f32"),
    torch.float64: ("float64", "f64"),
    torch.float16: ("float16", "f16"),
    torch.bfloat16: ("bfloat16", "bf16"),
    torch.int64: ("int64", "i64"),
    torch.int32: ("int32", "i32"),
    torch.int16: ("int16", "i16"),
    torch.int8: ("int8", "i8"),
    torch.uint8: ("uint8", "ui8"),
    torch.bool: ("bool", "i1"),
    torch.complex64: ("complex64", None),
    torch.complex128: ("complex128", None),
}
_BY_NAME = {v[0]: k for k, v in _DTYPES.items()}
_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1, torch.channels_last: 2, torch.channels_last_3d: 3}


class Refused(Exception):
    pass


class Unsafe(Refused):
    """A recorded call that no program may make: a random draw, a write into an input."""


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, args, kwargs, out))
        return out


def _storage(t):
    return t.untyped_storage()._cdata


def _tensors_of(out, n_returns):
    """The tensors an op returned, each with its (result, element) position."""
    if isinstance(out, torch.Tensor):
        return [(out, 0, -1)]
    if n_returns == 1:  # one Tensor[] result: its elements
        return [(x, 0, e) for e, x in enumerate(out) if isinstance(x, torch.Tensor)]
    found = []
    for r, o in enumerate(out if isinstance(out, (tuple, list)) else ()):
        if isinstance(o, torch.Tensor):
            found.append((o, r, -1))
        elif isinstance(o, (tuple, list)):
            found.extend((x, r, e) for e, x in enumerate(o) if isinstance(x, torch.Tensor))
    return found


def _number(v):
    if isinstance(v, complex):
        return f"c{v.real!r},{v.imag!r}"
    return f"f{float(v)!r}" if isinstance(v, float) else f"i{int(v)}"


_COMPLEX = {torch.complex64: torch.float32, torch.complex128: torch.float64}


class _Encoder:
    """Each tensor's reference: operand k is %k; a complex operand (its graph value the real pairs,
    [..., 2]) is the result of a first call, aten::view_as_complex(%k), so the calls recorded on
    the complex tensors start after those (`first`)."""

    def __init__(self, inputs, pairs=()):
        self.refs = {id(t): f"%{k}" for k, t in enumerate(inputs)}
        self.prelude = []
        for k, t in enumerate(inputs):
            if k in pairs:
                self.refs[id(t)] = f"${len(self.prelude)}.0"
                self.prelude.append(f"aten::view_as_complex(%{k})")
        self.first = len(self.prelude)
        self.input_storages = {_storage(t) for t in inputs}

    def ref(self, t):
        r = self.refs.get(id(t))
        if r is None:
            raise Refused("a tensor the recorded calls did not make (a constant of the function's)")
        return r

    def arg(self, ty, v):
        """One argument's encoding by its schema type (ints hold dtypes, layouts and memory formats)."""
        kind = type(ty).__name__
        if v is None:
            return "n"
        if kind == "OptionalType":
            return self.arg(ty.getElementType(), v)
        if kind == "TensorType":
            return self.ref(v)
        if isinstance(v, torch.dtype):
            return "d" + _DTYPES[v][0]
        if isinstance(v, torch.layout):
            if v != torch.strided:
                raise Refused(f"layout {v}")
            return "l0"
        if isinstance(v, torch.memory_format):
            return f"m{_FORMATS[v]}"
        if isinstance(v, torch.device) or kind == "DeviceObjType":
            if torch.device(v).type != "meta":
                raise Refused(f"a call on device {v}")
            return "D"
        if kind in ("IntType", "SymIntType"):
            return f"i{int(v)}"
        if kind == "FloatType":
            return f"f{float(v)!r}"
        if kind == "BoolType":
            return f"b{int(bool(v))}"
        if kind == "NumberType" and isinstance(v, (bool, int, float, complex)):
            return f"b{int(v)}" if isinstance(v, bool) else _number(v)
        if kind == "StringType":
            return f"s{len(v.encode())}:{v}"
        if kind == "ListType":
            elem = type(ty.getElementType()).__name__
            if elem in ("IntType", "SymIntType"):
                return "I[" + ",".join(str(int(x)) for x in v) + "]"
            if elem == "FloatType":
                return "F[" + ",".join(repr(float(x)) for x in v) + "]"
            if elem == "BoolType":
                return "B[" + ",".join(str(int(bool(x))) for x in v) + "]"
            if elem == "TensorType":
                return "T[" + ",".join(self.ref(x) for x in v) + "]"
            if elem == "OptionalType" and type(ty.getElementType().getElementType()).__name__ == "TensorType":
                return "O[" + ",".join("n" if x is None else self.ref(x) for x in v) + "]"
        raise Refused(f"an argument of type {ty} ({type(v).__name__})")

    def call(self, index, func, args, kwargs, out, top=False):
        if func.namespace != "aten":
            raise Refused(f"{func} is not an aten op")
        # (the binding's own op may take a dropout; the calls it made, checked first, drew nothing)
        if torch.Tag.nondeterministic_seeded in func.tags and not top:
            raise Unsafe(f"{func} draws random numbers")
        schema = func._schema
        encoded = []
        for i, a in enumerate(schema.arguments):
            if i < len(args) and not a.kwarg_only:
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                raise Refused(f"{func}: no value for {a.name}")
            written = a.alias_info is not None and a.alias_info.is_write
            if written and isinstance(v, torch.Tensor) and _storage(v) in self.input_storages:
                raise Unsafe(f"{func} writes into an input")
            if a.N and isinstance(v, (int, float)) and type(a.type).__name__ == "ListType":
                v = [v] * a.N  # int[3] given one int, as the binding broadcasts it
            encoded.append(self.arg(a.type, v))
        for t, r, e in _tensors_of(out, len(schema.returns)):
            if id(t) not in self.refs:
                self.refs[id(t)] = f"${self.first + index}.{r}" + (f".{e}" if e >= 0 else "")
        name = f"aten::{schema.name.split('::', 1)[1]}" + (f".{schema.overload_name}" if schema.overload_name else "")
        return f"{name}({', '.join(encoded)})"


def _replace(v, inputs):
    if isinstance(v, Input):
        return inputs[v.index]
    if isinstance(v, tuple) and type(v) is tuple:
        return tuple(_replace(x, inputs) for x in v)
    if isinstance(v, list):
        return [_replace(x, inputs) for x in v]
    return v


def _structure(v, enc, results):
    """What the function returned, as capture rebuilds it: ("t", j) result j, ("c", value), ("s", type, items)."""
    if isinstance(v, torch.Tensor):
        ref = enc.refs.get(id(v))
        if ref is None or not ref.startswith("$"):
            raise Refused("it returns one of its inputs")
        if _storage(v) in enc.input_storages:
            raise Refused("it returns a view of an input")
        names = _DTYPES.get(_COMPLEX.get(v.dtype, v.dtype))
        if names is None or names[1] is None:
            raise Refused(f"a result of dtype {v.dtype}")
        if any(_storage(v) == _storage(o) for o, _ in results):
            raise Refused("two results share memory")
        results.append((v, ref))
        return ("z" if v.dtype in _COMPLEX else "t", len(results) - 1)
    if v is None or isinstance(v, (bool, int, float)):
        return ("c", v)
    if isinstance(v, (tuple, list)):
        kind = type(v) if type(v) not in (tuple, list) else None
        return ("s", kind if kind is not None else type(v), tuple(_structure(x, enc, results) for x in v))
    raise Refused(f"it returns a {type(v).__name__}")


def _flat_tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _flat_tensors(x)]
    return []


def _top_level(fn, args, kwargs, out, enc):
    """The one aten op fn's binding calls (aten::<its name>, the overload its arguments pick), encoded, its
    results mapped onto the tensors fn returned; None where there is no such op or the results do not
    line up.  It runs on the CPU what eager's binding runs: a composite's C++ that branches on the device
    or on tensor subclasses (max_pool1d's CPU kernel, which meta tensors never reach) takes eager's branch."""
    if isinstance(fn, torch._ops.OpOverload):  # torch.ops.aten.<op>.<overload> called itself
        packet, name = fn.overloadpacket, fn._schema.name.split("::", 1)[1]
    elif isinstance(fn, torch._ops.OpOverloadPacket):
        packet, name = fn, fn._qualified_op_name.split("::", 1)[1]
    else:
        name = getattr(fn, "__name__", "")
        packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return None
    try:
        picked = fn._overloadname if isinstance(fn, torch._ops.OpOverload) else \
            torch._C._jit_resolve_packet(f"aten::{name}", *args, **kwargs)
    except Exception:  # noqa: BLE001 - no overload takes these arguments: the recorded calls instead
        return None
    # the overload the binding picks; where a program cannot say its arguments (a number given for a
    # Tensor parameter: mul.Tensor of a complex tensor and 2), another of the op's that takes them
    for overload in [picked] + [o for o in packet.overloads() if o != picked and not o.endswith("out")]:
        try:
            op = getattr(packet, overload)
            op_out = op(*args, **kwargs)
        except Exception:  # noqa: BLE001
            continue
        mine, theirs = _flat_tensors(out), _tensors_of(op_out, len(op._schema.returns))
        if len(mine) != len(theirs) or any(a.shape != b.shape or a.dtype != b.dtype
                                           for a, (b, _, _) in zip(mine, theirs)):
            continue
        try:
            call = enc.call(0, op, args, kwargs, op_out, top=True)
        except (Refused, KeyError, TypeError, ValueError):
            continue
        break
    else:
        return None
    for t, (other, _, _) in zip(mine, theirs):
        enc.refs[id(t)] = enc.refs[id(other)]
    return call, enc


def _input(dt, sizes, strides, pair):
    x = torch.empty_strided(sizes, strides, dtype=_BY_NAME[dt], device="meta")
    return torch.view_as_complex(x) if pair else x


def record(fn, args, kwargs, metas):
    """(program, result types, result strides, structure), or a str: why fn cannot be one pt2.aten.
    metas: each operand's (dtype, sizes, strides, pair): a pair operand is a complex tensor's real
    pairs (view_as_real's [..., 2]), which the function gets as the complex tensor; a complex result
    is handed back the same way (its structure's "z", the program's last calls view_as_real)."""
    pairs = {k for k, m in enumerate(metas) if m[3]}
    try:
        inputs = [_input(*m) for m in metas]
    except RuntimeError as e:  # a pair whose strides view_as_complex refuses
        return f"a complex operand ({str(e).splitlines()[0]})"
    args, kwargs = _replace(args, inputs), {k: _replace(v, inputs) for k, v in kwargs.items()}
    rec = _Recorder()
    try:
        with rec:
            out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - any failure of the meta run refuses
        return f"its run on meta tensors raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    try:
        if not rec.calls:
            raise Refused("it dispatches no aten op")
        enc, why = _Encoder(inputs, pairs), None
        try:  # every call checked; their program, where the binding's own op cannot be one
            calls = [enc.call(i, f, a, k, o) for i, (f, a, k, o) in enumerate(rec.calls)]
        except Unsafe:
            raise
        except Refused as e:
            why = e
        top = _top_level(fn, args, kwargs, out, _Encoder(inputs, pairs))
        if top is not None:
            calls, enc = [top[0]], top[1]
        elif why is not None:
            raise why
        results = []
        structure = _structure(out, enc, results)
        if not results:
            raise Refused("it returns no tensor")
        if len(results) > 4:
            raise Refused("it returns more than 4 tensors")
    except (Refused, KeyError, TypeError, ValueError) as e:
        return str(e) if isinstance(e, Refused) else f"an argument of no known encoding ({type(e).__name__}: {e})"
    calls = enc.prelude + calls
    for j, (t, ref) in enumerate(results):  # a complex result as its real pairs: resolve_conj, then view_as_real
        if t.dtype in _COMPLEX:
            calls += [f"aten::resolve_conj({ref})", f"aten::view_as_real(${len(calls)}.0)"]
            results[j] = (torch.view_as_real(t.resolve_conj() if t.is_conj() else t), f"${len(calls) - 1}.0")
    program = " ; ".join(calls) + " -> " + ", ".join(ref for _, ref in results)
    types = ";".join(f"{_DTYPES[t.dtype][1]}[{','.join(str(s) for s in t.shape)}]" for t, _ in results)
    strides = tuple(tuple(t.stride()) for t, _ in results)
    return program, types, strides, structure
