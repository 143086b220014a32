#!/usr/bin/env python3
"""numpy side of the pt2-run tests: writes inputs, checks outputs against
numpy as the independent oracle.

    npy_io.py write DIR NAME DTYPE SHAPE VALUES...   one .npy (VALUES repeat to fill)
    npy_io.py write-fortran DIR NAME                 a Fortran-ordered 2x3 float32
    npy_io.py check-main IN_DIR OUT_DIR              outputs of @main in pt2-run.mlir
    npy_io.py check-bf16 IN_DIR OUT_DIR              outputs of @bf16_neg
"""
import os
import sys

import numpy as np


def bf16_round(x):
    """float32 -> nearest bfloat16 (ties to even), as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def expect(name, got, dtype, shape, want, exact=False):
    assert got.dtype == np.dtype(dtype), f"{name}: dtype {got.dtype}, expected {dtype}"
    assert got.shape == tuple(shape), f"{name}: shape {got.shape}, expected {tuple(shape)}"
    if exact:
        assert np.array_equal(got, want), f"{name}: {got} != {want}"
    else:
        assert np.allclose(got.astype(np.float64), np.asarray(want, dtype=np.float64), rtol=1e-6, atol=1e-6), \
            f"{name}: {got} != {want}"
    print(f"{name}: {dtype} {tuple(shape)} ok")


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        out_dir, name, dtype, shape = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
        dims = tuple(int(d) for d in shape.split("x")) if shape != "scalar" else ()
        values = [float(v) for v in sys.argv[6:]]
        n = int(np.prod(dims)) if dims else 1
        data = np.resize(np.array(values), n).astype(dtype).reshape(dims)
        np.save(os.path.join(out_dir, name), data)
    elif cmd == "write-fortran":
        a = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
        np.save(os.path.join(sys.argv[2], sys.argv[3]), a)
    elif cmd == "check-main":
        inp, out = sys.argv[2], sys.argv[3]
        x = np.load(os.path.join(inp, "x.npy"))
        b = np.load(os.path.join(inp, "b.npy"))
        i = np.load(os.path.join(inp, "i.npy"))
        o = [np.load(os.path.join(out, f"out{k}.npy")) for k in range(5)]
        expect("out0 x + b", o[0], "float32", (2, 3), x + b)
        expect("out1 argmax(x, 1)", o[1], "int64", (2,), np.argmax(x, axis=1), exact=True)
        expect("out2 x > b", o[2], "bool", (2, 3), x > b, exact=True)
        expect("out3 (x + b) as f16", o[3], "float16", (2, 3), (x + b).astype(np.float16), exact=True)
        expect("out4 sum(i) as f64", o[4], "float64", (), i.astype(np.float64).sum())
    elif cmd == "check-bf16":
        inp, out = sys.argv[2], sys.argv[3]
        c = np.load(os.path.join(inp, "c.npy"))
        o = np.load(os.path.join(out, "out0.npy"))
        # bfloat16 has no numpy dtype: pt2-run reads and writes it as float32
        expect("out0 -c in bf16", o, "float32", c.shape, -bf16_round(c), exact=True)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
