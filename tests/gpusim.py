"""A SIMT simulator of pt2-gpu-map-loops' output, so that the GPU mapping (row kernels, warp shuffles,
shared memory, barriers) is checked for results, out-of-bounds accesses and races without a GPU.

It reads the host function after `pt2-gpu-map-loops` in MLIR's generic form: constants, allocations
and views on the host, and kernels, each a two-level scf.parallel mapped to block_x and thread_x.  A
kernel runs all its blocks at once (numpy arrays over [block, lane]), warp by warp: the 32 lanes of
a warp in lockstep (scf.if masks lanes, gpu.shuffle reads another lane's value), the warps of a block
one after another between two gpu.barrier ops (in the order `warp_order` gives, so that a stage that
reads another warp's writes without a barrier between reads stale memory).  Every load and store is
bounds-checked and recorded; at each barrier, two different threads of a block touching one address
with a write among them is a race, as is, at the end of a kernel, an address one block writes and
another touches.  Temporaries start as NaN.  A cf.assert (an index check) false in a running lane
raises DeviceAssert, as CUDA's device-side assert fails the kernel.

    sim = Simulator(text)          # pt2-opt ... --pass-pipeline=...pt2-gpu-map-loops --mlir-print-op-generic
    outs = sim.run([x, w, b])      # numpy inputs in, numpy outputs (the function's out-params) back
    sim.kernels                    # [(blocks, threads)] of each launch
"""
import math
import re

import numpy as np
import torch

WARP = 32


class SimError(Exception):
    pass


class DeviceAssert(SimError):
    """A cf.assert that failed in a running lane: CUDA's device-side assert (__assertfail), after which
    eager's CUDA raises "device-side assert triggered".  The message is the assert's."""


# ---------------------------------------------------------------------------------------------------
# Parsing MLIR's generic form
# ---------------------------------------------------------------------------------------------------

class Op:
    def __init__(self, name, results, operands, attrs, regions, types):
        self.name, self.results, self.operands, self.attrs, self.regions, self.types = name, results, operands, attrs, regions, types

    def __repr__(self):
        return f"Op({self.name})"


class Block:
    def __init__(self, args, ops):
        self.args, self.ops = args, ops


def _split_top(s, sep=","):
    out, depth, cur, quote, prev = [], 0, "", False, ""
    for ch in s:
        if ch == '"':
            quote = not quote
        arrow = ch == ">" and prev == "-"
        prev = ch
        if not quote and not arrow:
            if ch in "(<[{":
                depth += 1
            elif ch in ")>]}":
                depth -= 1
        if ch == sep and depth == 0 and not quote:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _matching(s, i):
    """Index of the bracket closing s[i]."""
    pairs = {"(": ")", "<": ">", "[": "]", "{": "}"}
    depth, quote = 0, False
    for j in range(i, len(s)):
        ch = s[j]
        if ch == '"':
            quote = not quote
        if quote or (ch == ">" and j > 0 and s[j - 1] == "-"):
            continue
        if ch in pairs:
            depth += 1
        elif ch in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    raise SimError("unbalanced brackets in " + s[:200])


_OP_HEAD = re.compile(r'^\s*(?:(?P<res>%[\w.]+(?::\d+)?(?:\s*,\s*%[\w.]+(?::\d+)?)*)\s*=\s*)?"(?P<name>[\w.]+)"\((?P<ops>[^)]*)\)(?P<rest>.*)$')


class Parser:
    def __init__(self, text):
        lines = [l for l in text.split("\n") if l.strip() and not l.strip().startswith("//")]
        # attribute aliases (#map = affine_map<...>) are written into the ops that use them
        self.aliases = dict(re.match(r"^(#[\w.]+) = (.*)$", l.strip()).groups() for l in lines if l.startswith("#"))
        self.lines = [l for l in lines if not l.startswith("#")]
        for name in sorted(self.aliases, key=len, reverse=True):
            self.lines = [re.sub(re.escape(name) + r"(?![\w.])", self.aliases[name], l) if name in l else l
                          for l in self.lines]
        self.i = 0

    def parse_region_blocks(self):
        """Blocks until the line closing the region ('})' or '}, {')."""
        blocks = []
        args, ops = [], []
        while self.i < len(self.lines):
            line = self.lines[self.i].strip()
            if line.startswith("}"):
                blocks.append(Block(args, ops))
                return blocks, line
            if line.startswith("^"):
                if ops or args:
                    blocks.append(Block(args, ops))
                inner = line[line.index("(") + 1: line.rindex(")")] if "(" in line else ""
                args = [a.split(":")[0].strip() for a in _split_top(inner)] if inner else []
                ops = []
                self.i += 1
                continue
            ops.append(self.parse_op())
        raise SimError("unterminated region")

    def parse_op(self):
        line = self.lines[self.i].strip()
        m = _OP_HEAD.match(line)
        if not m:
            raise SimError("cannot parse: " + line[:200])
        results = []
        if m.group("res"):
            for r in _split_top(m.group("res")):
                if ":" in r:
                    base, n = r.split(":")
                    results += [f"{base}#{k}" for k in range(int(n))]
                else:
                    results.append(r)
        operands = [o.strip() for o in m.group("ops").split(",") if o.strip()]
        rest = m.group("rest").strip()
        self.i += 1
        regions = []
        attr_text = ""
        if rest.startswith("<{"):
            j = _matching(rest, 1)
            attr_text += rest[2:j]
            rest = rest[j + 2:].strip()
        if rest.startswith("({"):
            while True:
                blocks, closer = self.parse_region_blocks()
                regions.append(blocks)
                self.i += 1
                if closer.startswith("}, {"):
                    continue
                rest = closer[2:].strip()  # after '})'
                break
        if rest.startswith("{"):
            j = _matching(rest, 0)
            attr_text += ", " + rest[1:j]
            rest = rest[j + 1:].strip()
        types = rest[1:].strip() if rest.startswith(":") else ""
        return Op(m.group("name"), results, operands, attr_text, regions, types)


def _result_types(types):
    """The result types of a function type '(a, b) -> c' or '(a) -> (c, d)'."""
    if "->" not in types:
        return []
    j = _matching(types, types.index("("))
    res = types[j + 1:].strip()[2:].strip()
    if res.startswith("("):
        return _split_top(res[1:-1])
    return [res]


def _operand_types(types):
    if not types.startswith("("):
        return []
    j = _matching(types, 0)
    return _split_top(types[1:j])


# ---------------------------------------------------------------------------------------------------
# Types and memory
# ---------------------------------------------------------------------------------------------------

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32, "i1": np.bool_, "i8": np.int8,
          "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64, "ui8": np.uint8}


def _bf16_round(x):
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    out = b.astype(np.uint32).view(np.float32)
    return np.where(nan, np.float32("nan"), out)


class MemRefType:
    def __init__(self, text):
        m = re.match(r"memref<(.*)>$", text.strip())
        if not m:
            raise SimError("not a memref type: " + text)
        parts = _split_top(m.group(1))
        dims = parts[0].split("x")
        self.elem = dims[-1]
        self.shape = [int(d) for d in dims[:-1]]
        self.offset = 0
        self.strides = None
        self.shared = any("workgroup" in p for p in parts[1:])
        for p in parts[1:]:
            if p.startswith("strided<"):
                sm = re.match(r"strided<\[([^\]]*)\](?:,\s*offset:\s*(-?\d+))?>", p)
                self.strides = [int(s) for s in sm.group(1).split(",")] if sm.group(1).strip() else []
                self.offset = int(sm.group(2) or 0)
        if self.strides is None:
            self.strides, acc = [], 1
            for d in reversed(self.shape):
                self.strides.insert(0, acc)
                acc *= d
        self.size = int(np.prod(self.shape)) if self.shape else 1


class Buffer:
    count = 0

    def __init__(self, n, elem, fill=None):
        dt = DTYPES[elem]
        self.data = np.zeros(n, dtype=dt) if fill is None else np.full(n, fill, dtype=dt)
        self.elem = elem
        Buffer.count += 1
        self.id = Buffer.count


class MemRef:
    def __init__(self, buf, t):
        self.buf, self.t = buf, t


# ---------------------------------------------------------------------------------------------------
# Values inside a kernel: numpy arrays over [blocks, lanes] (or scalars, the same in every lane)
# ---------------------------------------------------------------------------------------------------

def _cmp(pred, a, b, is_float):
    if is_float:
        # arith.cmpf predicates: 0 false, 1 oeq, 2 ogt, 3 oge, 4 olt, 5 ole, 6 one, 7 ord, 8 ueq, 9 ugt, 10 uge,
        # 11 ult, 12 ule, 13 une, 14 uno, 15 true
        uno = np.isnan(a) | np.isnan(b)
        table = {0: np.zeros_like(uno), 1: (a == b) & ~uno, 2: (a > b) & ~uno, 3: (a >= b) & ~uno, 4: (a < b) & ~uno,
                 5: (a <= b) & ~uno, 6: (a != b) & ~uno, 7: ~uno, 8: (a == b) | uno, 9: (a > b) | uno, 10: (a >= b) | uno,
                 11: (a < b) | uno, 12: (a <= b) | uno, 13: (a != b) | uno, 14: uno, 15: np.ones_like(uno)}
        return table[pred]
    # arith.cmpi: 0 eq, 1 ne, 2 slt, 3 sle, 4 sgt, 5 sge, 6 ult, 7 ule, 8 ugt, 9 uge
    if pred >= 6:
        a, b = np.asarray(a).astype(np.uint64), np.asarray(b).astype(np.uint64)
    return {0: a == b, 1: a != b, 2: a < b, 3: a <= b, 4: a > b, 5: a >= b, 6: a < b, 7: a <= b, 8: a > b, 9: a >= b}[pred]


def _torch_unary(fn, x):
    arr = np.asarray(x)
    return fn(torch.from_numpy(np.ascontiguousarray(arr.astype(np.float64)))).numpy().astype(arr.dtype)


def _unsigned(x):
    """x's bits as an unsigned integer of its width (the operand of extui, uitofp, divui, maxui, ...)."""
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x


def _cast(x, elem):
    if elem == "bf16":
        return _bf16_round(x)
    return np.asarray(x).astype(DTYPES[elem])


def _bitcast(x, src, dst):
    """arith.bitcast between a float and an integer of its width (bf16 is held as float32: its bits are
    the upper half)."""
    x = np.asarray(x)
    if src == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.int16)
    if dst == "bf16":
        return (x.astype(np.int16).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return x.astype(DTYPES[src]).view(DTYPES[dst])


def _ipowi(x, e):
    """math.ipowi: x to the power e by squaring, wrapping at x's width; a negative power is 1 / x^-e in
    integers (1 for x = 1, +-1 for x = -1, else 0; x = 0 is undefined there, and pt2-lower selects 0)."""
    x, e = np.broadcast_arrays(x, e)
    r, base, k = np.ones_like(x), x.copy(), np.abs(e.astype(np.int64))
    while (k > 0).any():
        r = np.where(k & 1, r * base, r)
        base, k = base * base, k >> 1
    odd = (e & 1).astype(bool)
    neg = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0)).astype(x.dtype)
    return np.where(e < 0, neg, r)


def _affine_apply(attrs, vals):
    """affine.apply of an affine_map<(d0, ..)[s0, ..] -> (expr)> with +, -, *, floordiv, mod."""
    m = re.search(r"affine_map<\(([^)]*)\)(?:\[([^\]]*)\])? -> \((.*)\)>", attrs)
    names = [d.strip() for d in m.group(1).split(",") if d.strip()]
    names += [x.strip() for x in (m.group(2) or "").split(",") if x.strip()]
    expr = m.group(3)
    if "ceildiv" in expr or "," in expr:
        raise SimError("affine map " + expr)
    expr = expr.replace("floordiv", "//").replace("mod", "%")
    return eval(expr, {"__builtins__": {}}, {k: np.asarray(v, dtype=np.int64) for k, v in zip(names, vals)})


UNARY_MATH = {
    "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2, "math.log1p": np.log1p,
    "math.expm1": np.expm1, "math.sqrt": np.sqrt, "math.absf": np.abs, "math.tanh": np.tanh, "math.sin": np.sin,
    "math.cos": np.cos, "math.floor": np.floor, "math.ceil": np.ceil, "math.round": np.round, "math.roundeven": np.round,
    "math.trunc": np.trunc, "math.tan": np.tan, "math.asin": np.arcsin, "math.acos": np.arccos, "math.atan": np.arctan,
    "math.sinh": np.sinh, "math.cosh": np.cosh, "math.asinh": np.arcsinh, "math.acosh": np.arccosh,
    "math.atanh": np.arctanh,
}


class Pointer:
    """A pointer into a block's shared array or a global buffer (memref.extract_aligned_pointer_as_index):
    its byte offset (a scalar, or an array over the lanes once lane-dependent offsets are added), and after
    nvvm.mapa the rank of the cluster's block whose shared array it addresses."""

    def __init__(self, memref, offset, rank):
        self.memref, self.offset, self.rank = memref, offset, rank


class Kernel:
    def __init__(self, blocks, threads):
        self.blocks, self.threads = blocks, threads


class Simulator:
    def __init__(self, text, warp_order="forward"):
        mod = Parser(text).parse_op()
        funcs = [op for op in mod.regions[0][0].ops if op.name == "func.func"]
        self.globals = {}
        self.constants = {}
        for op in mod.regions[0][0].ops:
            if op.name == "memref.global":
                name = re.search(r'sym_name = "([^"]+)"', op.attrs).group(1)
                ty = re.search(r"type = (memref<.*?>)(?:,\s*\w+\s*=|$)", op.attrs + ",x=").group(1)
                self.globals[name] = MemRefType(ty)
                init = re.search(r"initial_value = dense<([^>]*)>", op.attrs)
                if init and "constant" in op.attrs:  # the host's read-only constants (index tables)
                    self.constants[name] = init.group(1)
        funcs = [f for f in funcs if f.regions and f.regions[0] and f.regions[0][0].ops]  # not declarations
        if not funcs:
            raise SimError("no function")
        self.func = funcs[0]
        self.warp_order = warp_order
        self.kernels = []
        self.races = []

    # -- host -------------------------------------------------------------------------------------
    def run(self, inputs):
        body = self.func.regions[0][0]
        ftype = re.search(r"function_type = \((.*?)\) -> \(\)", self.func.attrs)
        arg_types = [MemRefType(t) for t in _split_top(ftype.group(1))]
        env = {}
        outs = []
        for i, (name, t) in enumerate(zip(body.args, arg_types)):
            if i < len(inputs):
                a = np.ascontiguousarray(inputs[i]).reshape(-1)
                buf = Buffer(t.size, t.elem)
                buf.data[:] = _cast(a, t.elem) if t.elem != "bf16" else _bf16_round(a)
            else:
                buf = Buffer(t.size, t.elem, fill=np.nan if t.elem in ("f32", "f64", "f16", "bf16") else None)
                outs.append((buf, t))
            env[name] = MemRef(buf, t)
        for op in body.ops:
            self.host_op(op, env)
        return [b.data.reshape(t.shape) for b, t in outs]

    def host_op(self, op, env):
        n = op.name
        if n == "arith.constant":
            env[op.results[0]] = self.constant(op)
        elif n.startswith("arith."):
            vals = [env[o] for o in op.operands]
            env[op.results[0]] = self.arith(op, vals)
        elif n in ("memref.alloc", "memref.alloca"):
            t = MemRefType(_result_types(op.types)[0])
            env[op.results[0]] = MemRef(Buffer(t.size + t.offset, t.elem, fill=np.nan if t.elem[0] in "fb" else None), t)
        elif n in ("memref.expand_shape", "memref.collapse_shape", "memref.cast", "memref.reinterpret_cast", "memref.subview"):
            src = env[op.operands[0]]
            env[op.results[0]] = MemRef(src.buf, MemRefType(_result_types(op.types)[0]))
        elif n == "scf.parallel":
            self.launch(op, env)
        elif n == "func.call" and re.search(r"callee = @pt2_gpu_", op.attrs):
            # a library call (cuDNN, cuBLAS) of the launch plan: the simulated machine has no library,
            # so the plan runs the loops kept behind a conv's call (its fallback) instead; a 1x1 conv's
            # cuBLAS entry (pt2_gpu_gemm_..._conv[_scaled]_<n>, passes/gpu_conv.c) keeps them too
            if "pt2_gpu_gemm" in op.attrs and not re.search(r"callee = @pt2_gpu_gemm_\w*_conv(_scaled)?_\d+\b", op.attrs):
                raise SimError("a cuBLAS call has no loops behind it: not simulated")
        elif n in ("func.return",):
            pass
        elif n == "memref.dealloc":
            pass
        elif n == "memref.get_global":
            name = re.search(r"name = @([\w.]+)", op.attrs).group(1)
            if name not in self.constants:
                raise SimError(f"host global @{name} has no constant value")
            t = self.globals[name]
            text = self.constants[name]
            if text.startswith('"'):
                raise SimError(f"host global @{name}: hex constants are not simulated")
            vals = [v for v in re.sub(r"[\[\]]", " ", text).replace(",", " ").split()]
            conv = float if t.elem[0] in "fb" else int
            a = np.array([conv(v) if v not in ("true", "false") else v == "true" for v in vals])
            buf = Buffer(t.size, t.elem)
            buf.data[:] = _cast(a if a.size == t.size else np.full(t.size, a[0]), t.elem)
            env[op.results[0]] = MemRef(buf, t)
        else:
            raise SimError(f"host op {n} is not simulated")

    def constant(self, op):
        b = re.search(r"value = (true|false)\b", op.attrs)
        if b:
            return np.bool_(b.group(1) == "true")
        v = re.search(r"value = ([^,]+?) : (\w+)", op.attrs)
        if not v:
            raise SimError("constant " + op.attrs)
        text, ty = v.group(1).strip(), v.group(2)
        if text in ("true", "false"):
            return np.bool_(text == "true")
        if ty in ("f32", "f64", "f16", "bf16"):
            if text.startswith("0x"):
                bits = int(text, 16)
                if ty == "f32":
                    return np.array([bits], dtype=np.uint32).view(np.float32)[0]
                if ty == "f64":
                    return np.array([bits], dtype=np.uint64).view(np.float64)[0]
                if ty == "f16":
                    return np.array([bits], dtype=np.uint16).view(np.float16)[0]
                return np.array([bits << 16], dtype=np.uint32).view(np.float32)[0]
            return _cast(np.float64(float(text)), ty)[()]
        return DTYPES[ty](int(text))

    # -- kernels ----------------------------------------------------------------------------------
    def launch(self, op, env):
        if "block_x" not in op.attrs:
            raise SimError("an unmapped scf.parallel on the host")
        lb, ub, st = (int(env[o]) for o in op.operands[:3])
        blocks = len(range(lb, ub, st))
        outer = op.regions[0][0]
        inner_ops = [o for o in outer.ops if o.name == "scf.parallel"]
        if len(inner_ops) != 1 or len([o for o in outer.ops if o.name not in ("scf.parallel", "scf.reduce", "arith.constant")]):
            raise SimError("a kernel must be block_x { thread_x { ... } }")
        for o in outer.ops:
            if o.name == "arith.constant":
                env[o.results[0]] = self.constant(o)
        thr = inner_ops[0]
        # threads: thread_x, or (thread_x, thread_y) with the linear index y * nx + x (as CUDA forms warps)
        n = len(thr.regions[0][0].args)
        if n not in (1, 2) or (n == 2 and "thread_y" not in thr.attrs):
            raise SimError("a kernel's threads must be thread_x or (thread_x, thread_y)")
        bounds = [[int(env[o]) for o in thr.operands[d::n]][:3] for d in range(n)]
        dims = [len(range(lb_, ub_, st_)) for lb_, ub_, st_ in bounds]
        threads = math.prod(dims)
        self.kernels.append(Kernel(blocks, threads))
        body = thr.regions[0][0]
        # a cluster barrier (gpu_rows_cluster.c: nvvm.cluster.arrive, then nvvm.cluster.wait naming the
        # cluster's blocks) ends a segment as a block's barrier does: all blocks run each segment at once
        segments, cur, cluster, ends_cluster = [], [], 1, []
        for o in body.ops:
            if o.name in ("gpu.barrier", "nvvm.cluster.wait"):
                segments.append(cur)
                ends_cluster.append(o.name == "nvvm.cluster.wait")
                cur = []
                m = re.search(r"pt2.cluster_blocks = (\d+)", o.attrs)
                if m:
                    cluster = int(m.group(1))
            elif o.name not in ("scf.reduce", "nvvm.cluster.arrive"):
                cur.append(o)
        segments.append(cur)
        ends_cluster.append(True)
        if blocks % cluster:
            raise SimError(f"{blocks} blocks are not clusters of {cluster}")
        warps = (threads + WARP - 1) // WARP
        bidx = np.arange(lb, ub, st, dtype=np.int64)[:, None] * np.ones((1, WARP), dtype=np.int64)
        shared = {}
        wenv = []
        for w in range(warps):
            e = dict(env)
            lane = np.arange(WARP, dtype=np.int64)[None, :] + w * WARP
            e[outer.args[0]] = bidx
            ids = lane * np.ones((blocks, 1), dtype=np.int64)
            for d in range(n):
                lb_, _, st_ = bounds[d]
                e[body.args[d]] = (ids % dims[d]) * st_ + lb_
                ids = ids // dims[d]
            mask = (lane < threads) * np.ones((blocks, 1), dtype=bool)
            wenv.append((e, mask))
        self.kernel_log = []  # (buffer id, addresses, thread ids, block ids, is_write)
        order = list(range(warps)) if self.warp_order == "forward" else list(reversed(range(warps)))
        # a cluster's blocks only wait for each other at cluster barriers: what one block's thread writes
        # into shared memory that another block reads (distributed shared memory) between two of them
        # is a race, however many barriers of its own each block passed between (remote: those reads)
        epoch, self.remote = [], []
        for seg, cluster_end in zip(segments, ends_cluster):
            self.seg_log = []
            for w in order:
                e, mask = wenv[w]
                tid = (np.arange(WARP)[None, :] + w * WARP) * np.ones((blocks, 1), dtype=np.int64)
                self.cur = dict(shared=shared, blocks=blocks, tid=tid, bidx=bidx, warp=w, cluster=cluster)
                self.run_ops(seg, e, mask)
            self.check_races(self.seg_log, within_block=True)
            self.kernel_log += self.seg_log
            epoch += self.seg_log
            if cluster_end:
                self.check_cluster_races(epoch)
                epoch, self.remote = [], []
        self.check_races(self.kernel_log, within_block=False)

    def check_cluster_races(self, epoch):
        """Between two cluster barriers: an address of a block's shared memory that another block read
        through distributed shared memory and some other thread wrote."""
        for buf, addr, who in self.remote:
            writes = [r for r in epoch if r[0] == buf and r[4]]
            if not writes:
                continue
            w_addr = np.concatenate([r[1] for r in writes])
            w_who = np.concatenate([r[3] * 4096 + r[2] for r in writes])
            hit = np.isin(addr, w_addr)
            for a, h in zip(addr[hit], who[hit]):
                if (w_who[w_addr == a] != h).any():
                    self.races.append(f"blocks of a cluster race on shared buffer {buf} at address {int(a)}")
                    return

    def check_races(self, log, within_block):
        by_buf = {}
        for rec in log:
            by_buf.setdefault(rec[0], []).append(rec)
        for bid, recs in by_buf.items():
            if recs[0][5]:  # shared memory: per block by construction
                if not within_block:
                    continue
            addr = np.concatenate([r[1] for r in recs])
            who = np.concatenate([(r[3] * 4096 + r[2]) if within_block else r[3] for r in recs])
            wr = np.concatenate([np.full(len(r[1]), r[4]) for r in recs])
            if not wr.any():
                continue
            if within_block:
                blk = np.concatenate([r[3] for r in recs])
                key = addr * 65536 + blk  # addresses of one block only
            else:
                key = addr
            uniq, inv = np.unique(key, return_inverse=True)
            lo = np.full(len(uniq), np.iinfo(np.int64).max)
            hi = np.full(len(uniq), np.iinfo(np.int64).min)
            anyw = np.zeros(len(uniq), dtype=bool)
            np.minimum.at(lo, inv, who)
            np.maximum.at(hi, inv, who)
            np.logical_or.at(anyw, inv, wr)
            bad = (lo != hi) & anyw
            if bad.any():
                self.races.append(f"{'threads of a block' if within_block else 'blocks'} race on buffer {bid} "
                                  f"at {int(bad.sum())} addresses")

    def run_ops(self, ops, env, mask):
        for op in ops:
            self.kernel_op(op, env, mask)

    def kernel_op(self, op, env, mask):
        n = op.name
        if n in ("arith.addi", "arith.index_cast", "llvm.inttoptr") and isinstance(env[op.operands[0]], Pointer):
            ptr = env[op.operands[0]]
            if n == "arith.addi":
                ptr = Pointer(ptr.memref, ptr.offset + np.asarray(env[op.operands[1]], dtype=np.int64), ptr.rank)
            env[op.results[0]] = ptr
        elif n == "arith.constant":
            env[op.results[0]] = self.constant(op)
        elif n.startswith("arith.") or n.startswith("math."):
            env[op.results[0]] = self.arith(op, [env[o] for o in op.operands])
        elif n == "memref.load":
            m = env[op.operands[0]]
            env[op.results[0]] = self.access(m, [env[o] for o in op.operands[1:]], mask, None)
        elif n == "memref.store":
            m = env[op.operands[1]]
            self.access(m, [env[o] for o in op.operands[2:]], mask, env[op.operands[0]])
        elif n == "memref.get_global":
            name = re.search(r"name = @([\w.]+)", op.attrs).group(1)
            t = self.globals[name]
            sh = self.cur["shared"]
            if name not in sh:
                sh[name] = MemRef(Buffer(t.size * self.cur["blocks"], t.elem, fill=np.nan if t.elem[0] in "fb" else None), t)
            env[op.results[0]] = sh[name]
        elif n == "gpu.dynamic_shared_memory":
            env[op.results[0]] = ("dynamic shared memory", op.results[0])
        elif n == "memref.view":
            # a typed view of the block's dynamic shared memory: an array of its own (views never overlap)
            t = MemRefType(_result_types(op.types)[0])
            sh, key = self.cur["shared"], ("view", op.results[0])
            if key not in sh:
                sh[key] = MemRef(Buffer(t.size * self.cur["blocks"], t.elem, fill=np.nan if t.elem[0] in "fb" else None), t)
            env[op.results[0]] = sh[key]
        elif n == "scf.if":
            c = np.broadcast_to(np.asarray(env[op.operands[0]], dtype=bool), mask.shape)
            outs = []
            for region, m in ((op.regions[0], mask & c), (op.regions[1] if len(op.regions) > 1 else None, mask & ~c)):
                vals = []
                for o in (region[0].ops if region else []):
                    if o.name == "scf.yield":
                        vals = [env[x] for x in o.operands]
                    else:
                        self.kernel_op(o, env, m)
                outs.append(vals)
            for i, r in enumerate(op.results):  # each lane takes the value of the branch it ran
                env[r] = np.where(c, np.broadcast_to(outs[0][i], mask.shape), np.broadcast_to(outs[1][i], mask.shape))
        elif n == "scf.for":
            lb, ub, st = (np.asarray(env[o], dtype=np.int64) for o in op.operands[:3])
            if np.ndim(st) and not (st == st.flat[0]).all():
                raise SimError("scf.for steps differ between lanes")
            step = int(st.flat[0])
            uniform = all(np.ndim(v) == 0 or (v == v.flat[0]).all() for v in (lb, ub))
            lo = int(lb.flat[0]) if uniform else int(np.where(mask, lb, np.iinfo(np.int64).max).min())
            hi = int(ub.flat[0]) if uniform else int(np.where(mask, ub, np.iinfo(np.int64).min).max())
            body = op.regions[0][0]
            carried = [env[o] for o in op.operands[3:]]
            for i in range(lo, hi, step):
                m = mask if uniform else mask & (lb <= i) & (i < ub) & ((i - lb) % step == 0)
                env[body.args[0]] = np.int64(i)
                for a, v in zip(body.args[1:], carried):
                    env[a] = v
                for o in body.ops:
                    if o.name == "scf.yield":
                        new = [env[x] for x in o.operands]
                        carried = new if uniform else [np.where(m, a, b) for a, b in zip(new, carried)]
                    elif o.name == "gpu.barrier":
                        raise SimError("gpu.barrier inside scf.for")
                    else:
                        self.kernel_op(o, env, m)
            for r, v in zip(op.results, carried):
                env[r] = v
        elif n == "gpu.shuffle":
            v, off, width = (env[o] for o in op.operands)
            mode = re.search(r"mode = #gpu<shuffle_mode (\w+)>", op.attrs).group(1)
            if mode != "xor":
                raise SimError("shuffle mode " + mode)
            off, width = int(off), int(width)
            v = np.broadcast_to(np.asarray(v), mask.shape)
            lanes = np.arange(WARP)
            partner = lanes ^ off
            ok = partner < width
            src = np.where(ok, partner, lanes)
            if (mask & ~mask[:, src] & ok[None, :]).any():
                raise SimError("gpu.shuffle reads a lane that is not running")
            env[op.results[0]] = v[:, src]
            env[op.results[1]] = np.broadcast_to(ok[None, :], mask.shape)
        elif n == "memref.copy":
            # one thread copies the whole memref (pt2-gpu-map-loops' rule 4 for 0-d copies)
            src, dst = env[op.operands[0]], env[op.operands[1]]
            if mask.sum() > 1:
                raise SimError("memref.copy run by several threads")
            if mask.any():
                for idx in np.ndindex(*src.t.shape) if src.t.shape else [()]:
                    one = np.zeros_like(mask)
                    one[np.unravel_index(np.argmax(mask), mask.shape)] = True
                    v = self.access(src, [np.int64(i) for i in idx], one, None)
                    self.access(dst, [np.int64(i) for i in idx], one, v)
        elif n == "affine.apply":
            env[op.results[0]] = _affine_apply(op.attrs, [env[o] for o in op.operands])
        elif n == "memref.extract_aligned_pointer_as_index":
            # the start of a block's shared array (for nvvm.mapa, cp.async) or of a global buffer (cp.async's
            # source): a pointer into it, a byte offset
            env[op.results[0]] = Pointer(env[op.operands[0]], 0, None)
        elif n == "nvvm.cp.async.shared.global":
            self.async_copy(env[op.operands[0]], env[op.operands[1]], int(re.search(r"size = (\d+)", op.attrs).group(1)), mask)
        elif n in ("nvvm.cp.async.commit.group", "nvvm.cp.async.wait.group"):
            pass  # the copies ran at once: every thread sees its own (what wait_group guarantees)
        elif n == "nvvm.mapa":
            # the same address in the shared memory of the cluster's block of rank r (distributed shared memory)
            ptr, rank = env[op.operands[0]], env[op.operands[1]]
            env[op.results[0]] = Pointer(ptr.memref, ptr.offset, np.broadcast_to(np.asarray(rank, dtype=np.int64), mask.shape))
        elif n == "llvm.load":
            env[op.results[0]] = self.cluster_load(env[op.operands[0]], mask)
        elif n == "cf.assert":
            ok = np.broadcast_to(np.asarray(env[op.operands[0]], dtype=bool), mask.shape)
            if (mask & ~ok).any():
                text = re.search(r'msg = "((?:[^"\\]|\\.)*)"', op.attrs).group(1)
                raise DeviceAssert(re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text))
        elif n in ("scf.yield", "scf.reduce"):
            pass
        elif n == "gpu.barrier":
            raise SimError("gpu.barrier inside control flow")
        else:
            raise SimError(f"kernel op {n} is not simulated")

    def async_copy(self, dst, src, size, mask):
        """cp.async: `size` bytes from a global buffer into the block's shared array, each lane its own,
        both addresses aligned to the size, every element within its memref."""
        if not dst.memref.t.shared or src.memref.t.shared or dst.rank is not None:
            raise SimError("cp.async from other than global memory into the block's shared memory")
        esize = np.dtype(src.memref.buf.data.dtype).itemsize if src.memref.buf.elem != "bf16" else 2
        for ptr in (dst, src):
            off = np.broadcast_to(np.asarray(ptr.offset, dtype=np.int64), mask.shape)
            if (off % size != 0)[mask].any():
                raise SimError("cp.async of a misaligned address")
        for e in range(size // esize):
            v = self.flat_access(src.memref, np.asarray(src.offset, dtype=np.int64) // esize + e, mask, None)
            self.flat_access(dst.memref, np.asarray(dst.offset, dtype=np.int64) // esize + e, mask, v)

    def flat_access(self, m, flat, mask, value):
        """Element `flat` (per lane) of memref m, counted from its first element in its layout's order."""
        flat = np.broadcast_to(flat, mask.shape)
        if ((flat < 0) | (flat >= m.t.size))[mask].any():
            raise SimError(f"cp.async past the end of a memref of {m.t.size} elements")
        idx, rest = [], flat
        for d in reversed(m.t.shape):
            idx.insert(0, rest % d)
            rest = rest // d
        return self.access(m, idx, mask, value)

    def cluster_load(self, ptr, mask):
        """A load through distributed shared memory: the element at the pointer's byte offset in the shared
        array of the block of rank `ptr.rank` in the reading block's cluster."""
        if ptr.rank is None:
            raise SimError("llvm.load of a pointer nvvm.mapa did not map")
        m, n = ptr.memref, self.cur["cluster"]
        size = np.dtype(m.buf.data.dtype).itemsize if m.buf.elem != "bf16" else 2
        if ptr.offset % size or not 0 <= ptr.offset // size < m.t.size:
            raise SimError(f"a load of byte {ptr.offset} of a shared array of {m.t.size} elements")
        if ((ptr.rank < 0) | (ptr.rank >= n))[mask].any():
            raise SimError(f"nvvm.mapa to a rank outside the cluster of {n}")
        blk = np.broadcast_to(np.arange(mask.shape[0])[:, None], mask.shape)
        peer = blk // n * n + ptr.rank
        addr = m.t.offset + ptr.offset // size + peer * m.t.size
        self.remote.append((m.buf.id, addr[mask], (blk * 4096 + self.cur["tid"])[mask]))
        return m.buf.data[np.where(mask, addr, 0)]

    def access(self, m, idx, mask, value):
        t = m.t
        shape = mask.shape
        addr = np.full(shape, t.offset, dtype=np.int64)
        for i, (ix, s, d) in enumerate(zip(idx, t.strides, t.shape)):
            ix = np.broadcast_to(np.asarray(ix, dtype=np.int64), shape)
            if ((ix < 0) | (ix >= d))[mask].any():
                raise SimError(f"index {i} out of bounds [0, {d}) in a {'store' if value is not None else 'load'}")
            addr = addr + ix * s
        if t.shared:
            addr = addr + np.arange(shape[0])[:, None] * t.size  # a scratch array per block
        data = m.buf.data
        a = addr[mask]
        tid, blk = self.cur["tid"][mask], np.broadcast_to(np.arange(shape[0])[:, None], shape)[mask]
        self.seg_log.append((m.buf.id, a, tid, blk, value is not None, t.shared))
        if value is None:
            safe = np.where(mask, addr, 0)
            return data[safe]
        v = np.broadcast_to(np.asarray(value), shape)[mask]
        # lanes of one store writing the same address: the last lane wins, as a race check would flag
        data[a] = _cast(v, m.buf.elem) if m.buf.elem == "bf16" else v.astype(data.dtype)
        return None

    def arith(self, op, v):
        n = op.name[op.name.index(".") + 1:]
        rt = _result_types(op.types)
        res = rt[0] if rt else None
        f = np.errstate(all="ignore")
        with f:
            if n in ("extui", "uitofp", "index_castui", "divui", "remui", "maxui", "minui"):
                v = [_unsigned(x) for x in v]
            if n in ("addf", "addi"):
                r = v[0] + v[1]
            elif n in ("subf", "subi"):
                r = v[0] - v[1]
            elif n in ("mulf", "muli"):
                r = v[0] * v[1]
            elif n == "divf":
                r = np.divide(v[0], v[1])
            elif n in ("divui", "divsi", "floordivsi"):
                r = np.floor_divide(v[0], v[1]) if n != "divsi" else np.trunc(np.divide(v[0], v[1])).astype(np.asarray(v[0]).dtype)
            elif n in ("remui", "remsi"):
                r = np.remainder(v[0], v[1]) if n == "remui" else np.fmod(v[0], v[1])
            elif n == "remf":
                r = np.fmod(v[0], v[1])
            elif n == "negf":
                r = -v[0]
            elif n in ("maximumf",):
                r = np.maximum(v[0], v[1])
            elif n in ("minimumf",):
                r = np.minimum(v[0], v[1])
            elif n in ("maxnumf",):
                r = np.fmax(v[0], v[1])
            elif n in ("minnumf",):
                r = np.fmin(v[0], v[1])
            elif n in ("maxsi", "maxui"):
                r = np.maximum(v[0], v[1])
            elif n in ("minsi", "minui"):
                r = np.minimum(v[0], v[1])
            elif n == "andi":
                r = np.bitwise_and(v[0], v[1])
            elif n == "ori":
                r = np.bitwise_or(v[0], v[1])
            elif n == "xori":
                r = np.bitwise_xor(v[0], v[1])
            elif n == "select":
                r = np.where(np.asarray(v[0], dtype=bool), v[1], v[2])
            elif n in ("cmpf", "cmpi"):
                pred = int(re.search(r"predicate = (\d+)", op.attrs).group(1))
                return _cmp(pred, np.asarray(v[0]), np.asarray(v[1]), n == "cmpf")
            elif n in ("extf", "truncf", "sitofp", "uitofp", "fptosi", "fptoui", "extsi", "extui", "trunci", "index_cast",
                       "index_castui"):
                return _cast(v[0], res)
            elif n == "rsqrt":
                r = 1.0 / np.sqrt(v[0])
            elif n == "erf":
                r = _torch_unary(torch.special.erf, v[0])
            elif n == "erfc":
                r = _torch_unary(torch.special.erfc, v[0])
            elif n == "fma":
                r = v[0] * v[1] + v[2]
            elif n == "powf":
                r = np.power(v[0], v[1])
            elif n == "ipowi":
                r = _ipowi(np.asarray(v[0]), np.asarray(v[1]))
            elif n == "atan2":
                r = np.arctan2(v[0], v[1])
            elif n == "copysign":
                r = np.copysign(v[0], v[1])
            elif n == "bitcast":
                return _bitcast(v[0], _operand_types(op.types)[0], res)
            elif op.name in UNARY_MATH:
                r = UNARY_MATH[op.name](v[0])
            else:
                raise SimError(f"{op.name} is not simulated")
        return _cast(r, res) if res in DTYPES else r


# ---------------------------------------------------------------------------------------------------
# Running a pt2 graph through the front half of the GPU pipeline and the simulator
# ---------------------------------------------------------------------------------------------------

def find_ptxas():
    """CUDA's ptxas, or None where CUDA is not installed."""
    import os
    import shutil

    return shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)


def run_ptxas(ptx, *flags):
    """`ptxas -arch=sm_90 FLAGS` on one module's PTX (its completed process: returncode, stderr), or None
    where CUDA's ptxas is not installed."""
    import os
    import subprocess

    ptxas = find_ptxas()
    if not ptxas:
        return None
    return subprocess.run([ptxas, "-arch=sm_90", *flags, "-", "-o", os.devnull], input=ptx, capture_output=True, text=True)


def pipeline_ptx(pt2_opt, graph_text, disable=""):
    """The PTX of each gpu.module of a graph through the whole GPU pipeline (pt2GpuPipelineText's passes,
    one part a module)."""
    import ctypes
    import os
    import subprocess

    import pt2  # noqa: F401  (pt2GpuPipelineText through the package's library)
    from pt2 import _core

    _core._lib.pt2GpuPipelineText.restype = ctypes.c_char_p
    pipeline = _core._lib.pt2GpuPipelineText(disable.encode(), None).decode()
    r = subprocess.run([pt2_opt, "-", f"--pass-pipeline=builtin.module({pipeline})"], input=graph_text, capture_output=True,
                       text=True, env=dict(os.environ, PT2_GPU_PARTS="1"))
    if r.returncode != 0:
        raise SimError(r.stderr[-3000:])
    return [re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), m.group(1)).replace('\\"', '"').rstrip("\0")
            for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"', r.stdout)]


def mapped_text(pt2_opt, graph_text, disable=""):
    """pt2-opt: the GPU pipeline up to convert-parallel-loops-to-gpu: through pt2-gpu-map-loops and
    pt2-gpu-defer-index-checks (generic form), with the calls of repeated blocks (pt2-outline-repeats)
    inlined as the pipeline inlines them after kernel outlining."""
    import subprocess

    import pt2  # noqa: F401  (pt2GpuPipelineText through the package's library)
    from pt2 import _core

    _core._lib.pt2GpuPipelineText.restype = __import__("ctypes").c_char_p
    full = _core._lib.pt2GpuPipelineText(disable.encode(), None).decode()
    # math.ipowi stays an op here (convert-math-to-funcs, just before, makes it a call the kernels take along)
    prefix = full[: full.index(",func.func(convert-parallel-loops-to-gpu)")].removesuffix(",convert-math-to-funcs")
    if "pt2-outline-repeats" in prefix:
        prefix += ",inline{default-pipeline=}"
    r = subprocess.run([pt2_opt, "-", f"--pass-pipeline=builtin.module({prefix})", "--mlir-print-op-generic"],
                       input=graph_text, capture_output=True, text=True)
    if r.returncode != 0:
        raise SimError(r.stderr[-3000:])
    return r.stdout
