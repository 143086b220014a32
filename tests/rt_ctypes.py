"""Calling libpt2rt's entry points directly (ctypes), on torch views."""
import contextlib
import ctypes
import os

import pt2


def rt_library():
    """The libpt2rt that compiled kernels link: PT2_RT_LIBRARY, or the one beside libpt2."""
    env = os.environ.get("PT2_RT_LIBRARY")
    return env or os.path.join(os.path.dirname(pt2._core._lib._name), "libpt2rt.so")


class Unranked(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int64), ("descriptor", ctypes.c_void_p)]


def descriptor(view):
    """MLIR's ranked memref descriptor of a torch view (strides in elements),
    and the unranked memref pointing at it; keep both alive during the call."""
    r = view.dim()

    class Desc(ctypes.Structure):
        _fields_ = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
            ("sizes", ctypes.c_int64 * r),
            ("strides", ctypes.c_int64 * r),
        ]

    base = view.untyped_storage().data_ptr()
    d = Desc(base, base, view.storage_offset(), (ctypes.c_int64 * r)(*view.shape), (ctypes.c_int64 * r)(*view.stride()))
    return d, Unranked(r, ctypes.cast(ctypes.pointer(d), ctypes.c_void_p))


@contextlib.contextmanager
def gemm_library(name):
    """f32 GEMMs on `name` ("openblas", "onednn", "auto") inside the block, for
    this process's libpt2rt (the instance compiled kernels use too); "auto"
    again after it."""
    lib = ctypes.CDLL(rt_library())
    lib.pt2rt_set_gemm_library.argtypes = [ctypes.c_char_p]
    assert lib.pt2rt_set_gemm_library(name.encode()) == 0, name
    try:
        yield
    finally:
        lib.pt2rt_set_gemm_library(b"auto")
