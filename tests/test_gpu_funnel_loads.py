"""pt2-gpu-vector-access's funnel loads, run: kernels whose 16-byte runs of loads start at an offset
known only at run time (a weight read from a row's first aligned column, rows of an odd width), after
the pass, executed thread by thread by a small interpreter of the ops the pass emits, against numpy's
copy of the same elements, for every offset modulo the run; elements of 1 and 2 bytes, and words where
the kernel's blocks an SM are fixed (else they keep their loads); 1-D and 2-D buffers; and every byte the
kernel reads within the 16-byte chunks of its buffer.  No GPU needed."""
import os
import re
import subprocess

import numpy as np
import pytest

from gpusim import MemRefType, Parser, _operand_types, _result_types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PT2_OPT = os.path.join(ROOT, "build", "bin", "pt2-opt")

BITS = {"i8": 8, "bf16": 16, "f16": 16, "i16": 16, "f32": 32, "i32": 32, "f64": 64, "i64": 64, "index": 64, "i1": 1}


def _vector_type(t):
    m = re.match(r"vector<(\d+)x(\w+)>", t.strip())
    return (int(m.group(1)), m.group(2)) if m else None


def _bits_of(t):
    v = _vector_type(t)
    return BITS[v[1]] if v else BITS[t.strip()]


class Memory:
    """A kernel argument's bytes, with the chunks its loads touched."""

    def __init__(self, t, data):
        self.t = MemRefType(t)
        self.bytes = bytearray(data.tobytes()) + bytearray(64)  # room past the end: reads there are checked
        self.n = len(data.tobytes())
        self.elem = BITS[self.t.elem] // 8
        self.read = []

    def address(self, idx):
        return (self.t.offset + sum(i * s for i, s in zip(idx, self.t.strides))) * self.elem

    def load(self, idx, lanes):
        a = self.address(idx)
        self.read.append((a, a + lanes * self.elem))
        return [int.from_bytes(self.bytes[a + k * self.elem: a + (k + 1) * self.elem], "little") for k in range(lanes)]

    def store(self, idx, values):
        a = self.address(idx)
        assert 0 <= a and a + len(values) * self.elem <= self.n, (idx, len(values))
        for k, v in enumerate(values):
            self.bytes[a + k * self.elem: a + (k + 1) * self.elem] = int(v).to_bytes(self.elem, "little")


def _attr_int(op, name):
    return int(re.search(name + r" = (-?\d+)", op.attrs).group(1))


def run_thread(func, mems, block, thread):
    """The kernel's straight-line body for one thread; values are ints (bits) and vectors lists."""
    env = {a: mems[i] for i, a in enumerate(func.regions[0][0].args)}
    for op in func.regions[0][0].ops:
        n, ins = op.name, [env.get(o) for o in op.operands]
        rt = _result_types(op.types) if "->" in op.types else [op.types]
        mask = (1 << _bits_of(rt[0])) - 1 if rt and rt[0] and not rt[0].startswith(("memref", "vector")) else None
        if n == "arith.constant":
            env[op.results[0]] = int(re.search(r"value = (-?\d+) :", op.attrs).group(1)) & mask
        elif n in ("gpu.block_id", "gpu.thread_id"):
            env[op.results[0]] = (block if n == "gpu.block_id" else thread) if "dim x" in op.attrs else 0
        elif n in ("arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.shli", "arith.shrui"):
            a, b = ins
            f = {"arith.addi": int.__add__, "arith.subi": int.__sub__, "arith.muli": int.__mul__, "arith.andi": int.__and__,
                 "arith.ori": int.__or__, "arith.shli": int.__lshift__, "arith.shrui": int.__rshift__}[n]
            env[op.results[0]] = f(a, b) & mask
        elif n == "arith.cmpi":
            a, b = ins
            env[op.results[0]] = int({0: a == b, 1: a != b}[_attr_int(op, "predicate")])
        elif n == "arith.select":
            env[op.results[0]] = ins[1] if ins[0] else ins[2]
        elif n in ("arith.extui", "arith.trunci", "arith.index_cast"):
            env[op.results[0]] = ins[0] & mask
        elif n in ("memref.load", "vector.load"):
            lanes = _vector_type(rt[0])[0] if n == "vector.load" else 1
            idx = [i - (1 << 64) if i >= 1 << 63 else i for i in ins[1:]]  # index values are signed
            v = ins[0].load(idx, lanes)
            env[op.results[0]] = v if n == "vector.load" else v[0]
        elif n in ("memref.store", "vector.store"):
            v = ins[0] if n == "vector.store" else [ins[0]]
            ins[1].store([i - (1 << 64) if i >= 1 << 63 else i for i in ins[2:]], v)
        elif n == "vector.bitcast":
            src, dst = _vector_type(_operand_types(op.types)[0]), _vector_type(rt[0])
            whole = sum(x << (k * BITS[src[1]]) for k, x in enumerate(ins[0]))
            w = BITS[dst[1]]
            env[op.results[0]] = [(whole >> (k * w)) & ((1 << w) - 1) for k in range(dst[0])]
        elif n == "vector.extract":
            env[op.results[0]] = ins[0][int(re.search(r"static_position = array<i64: (\d+)>", op.attrs).group(1))]
        elif n == "vector.from_elements":
            env[op.results[0]] = list(ins)
        elif n == "gpu.return":
            break
        else:
            raise AssertionError("the interpreter does not know " + n)


def kernel_text(kind, elem, lanes, minctasm=False):
    """A kernel copying each thread's run of `lanes` elements: `weight` from w[h + lanes t] (h the block
    index; `offset`: of a view 5 elements into its buffer), `rows` from row r (the block) of rows of 37
    elements; minctasm: blocks an SM fixed by the
    kernel's shared memory, as pt2-gpu-kernel-args marks copied rows."""
    attrs = "{llvm.align = 16 : i64, llvm.noalias}"
    if kind in ("weight", "offset"):
        view = f"memref<301x{elem}, strided<[1], offset: 5>>" if kind == "offset" else f"memref<301x{elem}>"
        types = view, f"memref<33x320x{elem}>"
        start = "%i = arith.addi %b, %c : index"
        load, store = "memref.load %w[%a]", "memref.store %v, %y[%b, %o]"
    else:
        types = f"memref<9x37x{elem}>", f"memref<9x32x{elem}>"
        start = "%i = arith.addi %c, %c0 : index"
        load, store = "memref.load %w[%b, %a]", "memref.store %v, %y[%b, %o]"
    args = f"%w: {types[0]} {attrs}, %y: {types[1]} {attrs}"
    return f"""module attributes {{gpu.container_module}} {{
  gpu.module @k {{
    gpu.func @copy({args}) kernel{" attributes {nvvm.minctasm = 3 : i32}" if minctasm else ""} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cl = arith.constant {lanes} : index
      %b = gpu.block_id x
      %t = gpu.thread_id x
      %c = arith.muli %t, %cl : index
      {start}
      scf.for %l = %c0 to %cl step %c1 {{
        %a = arith.addi %i, %l : index
        %v = {load} : {types[0]}
        %o = arith.addi %c, %l : index
        {store} : {types[1]}
      }}
      gpu.return
    }}
  }}
}}
"""


def funnelled(text):
    r = subprocess.run([PT2_OPT, "-", "--pt2-gpu-vector-access", "--mlir-print-op-generic"], input=text,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mod = Parser(r.stdout).parse_op()
    gmod = next(o for o in mod.regions[0][0].ops if o.name == "gpu.module")
    return next(o for o in gmod.regions[0][0].ops if o.name == "gpu.func")


NP = {"i8": np.uint8, "bf16": np.uint16, "f16": np.uint16, "f32": np.uint32, "f64": np.uint64}


@pytest.mark.parametrize("elem,minctasm", [("i8", False), ("bf16", False), ("f16", False), ("f32", False), ("f32", True)])
@pytest.mark.parametrize("kind", ["weight", "offset", "rows"])
def test_funnel_loads_run(elem, minctasm, kind):
    lanes = 16 // (BITS[elem] // 8)
    func = funnelled(kernel_text(kind, elem, lanes, minctasm))
    names = [o.name for o in func.regions[0][0].ops]
    words = BITS[elem] >= 32 and not minctasm
    if words:
        assert names.count("memref.load") == lanes and "vector.load" not in names, names  # words stay scalar
    else:
        assert "memref.load" not in names and names.count("vector.load") == 2, names  # the run funnelled
        assert "arith.select" in names
    rng = np.random.default_rng(BITS[elem] + len(kind))
    one_row = kind != "rows"
    w_shape, y_shape = ((301,), (33, 320)) if one_row else ((9, 37), (9, 32))
    info = np.iinfo(NP[elem])
    shift = 5 if kind == "offset" else 0  # the view's first element in its buffer
    buf = rng.integers(0, info.max, size=(w_shape[0] + shift,) + w_shape[1:], dtype=NP[elem], endpoint=True)
    w = buf[shift:]
    blocks = 2 * lanes + 1 if one_row else 9  # every offset modulo the run, and past it
    threads = (w_shape[-1] - blocks) // lanes if one_row else 32 // lanes
    y = np.zeros(y_shape, dtype=NP[elem])
    mw = Memory(kernel_text(kind, elem, lanes).split("%w: ")[1].split(" {llvm")[0], buf)
    my = Memory(f"memref<{'x'.join(map(str, y_shape))}x{elem}>", y)
    for b in range(blocks):
        for t in range(threads):
            run_thread(func, [mw, my], b, t)
    out = np.frombuffer(bytes(my.bytes[:my.n]), dtype=NP[elem]).reshape(y_shape)
    expect = np.zeros_like(y)
    for b in range(blocks):
        for t in range(threads):
            src = w[b + t * lanes: b + t * lanes + lanes] if one_row else w[b, t * lanes: t * lanes + lanes]
            expect[b, t * lanes: t * lanes + lanes] = src
    np.testing.assert_array_equal(out, expect)
    # every load within a 16-byte aligned chunk of the buffer, past its end by less than a chunk
    for lo, hi in mw.read:
        assert lo >= 0 and lo < mw.n and (words or (lo % 16 == 0 and hi - lo == 16)), (lo, hi, mw.n)
