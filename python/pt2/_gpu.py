"""The GPU path of the ctypes binding (include/pt2.h, "GPU (CUDA)"; docs/gpu.md).

    g = pt2.Graph(); x = g.input(torch.float32, (4, 8)); g.outputs(g.op("relu", x))
    k = g.compile(device="cuda")          # PTX + launch plan; needs no GPU
    (y,) = k(torch.randn(4, 8, device="cuda"))

Inputs are CUDA tensors; outputs and the kernel's workspace are allocated with
torch (PyTorch's caching allocator owns them) on the inputs' device, and the
launches go to torch.cuda.current_stream().
"""
import ctypes

import torch

from ._core import DTYPES, Pt2Error, _error, _lib, _I64P, _IP, _sig

_sig("pt2CudaAvailable", ctypes.c_int)
_sig("pt2GpuCompileText", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
_sig("pt2GpuCompileGraph", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_sig("pt2GpuKernelDestroy", None, ctypes.c_void_p)
_sig("pt2GpuKernelNumInputs", ctypes.c_int, ctypes.c_void_p)
_sig("pt2GpuKernelNumOutputs", ctypes.c_int, ctypes.c_void_p)
_sig("pt2GpuKernelArgType", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, _IP, _I64P)
_sig("pt2GpuKernelFromCache", ctypes.c_int, ctypes.c_void_p)
_sig("pt2GpuKernelCompileSeconds", ctypes.c_double, ctypes.c_void_p)
_sig("pt2GpuKernelWorkspaceBytes", ctypes.c_size_t, ctypes.c_void_p)
_sig("pt2GpuKernelNumLaunches", ctypes.c_int, ctypes.c_void_p)
_sig("pt2GpuKernelUpgrading", ctypes.c_int, ctypes.c_void_p)
_sig("pt2GpuWaitBackground", None)
_sig("pt2GpuKernelPlanText", ctypes.c_char_p, ctypes.c_void_p)
_sig("pt2GpuKernelLaunch", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p)
_sig("pt2GpuKernelInputIsFrozen", ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_sig("pt2GpuKernelHasPrologue", ctypes.c_int, ctypes.c_void_p)
_sig("pt2GpuKernelPrologue", ctypes.c_void_p, ctypes.c_void_p)
_sig("pt2GpuKernelResetFrozen", None, ctypes.c_void_p)
_sig("pt2GpuSetMatmulAllowTF32", None, ctypes.c_int)
_sig("pt2GpuSetConvAllowTF32", None, ctypes.c_int)

_tf32 = None  # (matmul, cudnn) flags as last given to libpt2
ALIGNMENT = 16  # PT2_GPU_ALIGNMENT (include/pt2.h): every buffer of a launch


def _sync_matmul_flags():
    """cuBLAS calls in a plan follow torch.backends.cuda.matmul.allow_tf32, cuDNN
    calls torch.backends.cudnn.allow_tf32 (on by default in torch)."""
    global _tf32
    flags = (bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32))
    if flags != _tf32:
        _lib.pt2GpuSetMatmulAllowTF32(int(flags[0]))
        _lib.pt2GpuSetConvAllowTF32(int(flags[1]))
        _tf32 = flags


def _find_cublas():
    """libcublas for runtime/cublas.c: the one torch's wheels bring (nvidia-cublas),
    unless PT2_CUBLAS names one; the C side also tries the plain sonames."""
    import glob
    import os

    if os.environ.get("PT2_CUBLAS"):
        return
    try:
        import nvidia.cublas  # noqa: F401  (torch's CUDA wheels)

        for d in list(nvidia.cublas.__path__):
            libs = sorted(glob.glob(os.path.join(d, "lib", "libcublas.so.*")))
            if libs:
                os.environ["PT2_CUBLAS"] = libs[-1]
                return
    except ImportError:
        pass


_find_cublas()


def cuda_available():
    """Whether libpt2 can launch kernels here (the CUDA driver loads and finds a device)."""
    return bool(_lib.pt2CudaAvailable())


class GpuKernel:
    """A function compiled for the GPU; call it with CUDA tensors, get CUDA tensors."""

    def __init__(self, handle):
        self.handle = handle
        self.n_inputs = _lib.pt2GpuKernelNumInputs(handle)
        self.n_outputs = _lib.pt2GpuKernelNumOutputs(handle)
        self.arg_types = []
        for i in range(self.n_inputs + self.n_outputs):
            dt = ctypes.c_int()
            sizes = (ctypes.c_int64 * 8)()
            r = _lib.pt2GpuKernelArgType(handle, i, ctypes.byref(dt), sizes)
            self.arg_types.append((DTYPES[dt.value], tuple(sizes[j] for j in range(r))))
        self.from_cache = bool(_lib.pt2GpuKernelFromCache(handle))
        self.compile_seconds = _lib.pt2GpuKernelCompileSeconds(handle)
        self.workspace_bytes = _lib.pt2GpuKernelWorkspaceBytes(handle)
        self.num_launches = _lib.pt2GpuKernelNumLaunches(handle)
        self.frozen_inputs = [i for i in range(self.n_inputs) if _lib.pt2GpuKernelInputIsFrozen(handle, i)]
        self.has_prologue = bool(_lib.pt2GpuKernelHasPrologue(handle))
        self._pointers = (ctypes.c_void_p * max(self.n_inputs + self.n_outputs, 1))()

    @property
    def plan(self):
        """The launch plan and the PTX of every kernel, as text."""
        return _lib.pt2GpuKernelPlanText(self.handle).decode()

    @property
    def prologue_plan(self):
        """The plan the first launch runs on the frozen inputs (pt2-freeze), or None."""
        p = _lib.pt2GpuKernelPrologue(self.handle)
        return _lib.pt2GpuKernelPlanText(p).decode() if p else None

    @property
    def upgrading(self):
        """Whether a convolution of the plan still has a faster cuDNN plan coming."""
        return bool(_lib.pt2GpuKernelUpgrading(self.handle))

    def reset_frozen(self):
        """The frozen inputs changed: the next launch computes the prologue again."""
        _lib.pt2GpuKernelResetFrozen(self.handle)

    def __del__(self):
        if getattr(self, "handle", None):
            _lib.pt2GpuKernelDestroy(self.handle)
            self.handle = None

    def __call__(self, *inputs, out=None):
        if len(inputs) != self.n_inputs:
            raise Pt2Error(f"kernel takes {self.n_inputs} inputs, got {len(inputs)}")
        device = None
        args = []
        for i, t in enumerate(inputs):
            dt, shape = self.arg_types[i]
            if t.dtype != dt or tuple(t.shape) != shape:
                raise Pt2Error(f"input {i}: expected {dt} {list(shape)}, got {t.dtype} {list(t.shape)}")
            if not t.is_cuda:
                raise Pt2Error(f"input {i} is on {t.device}; a GPU kernel takes CUDA tensors")
            if device is not None and t.device != device:
                raise Pt2Error(f"input {i} is on {t.device}, input 0 on {device}: all inputs must be on one device")
            device = t.device
            t = t.contiguous()
            if t.data_ptr() % ALIGNMENT:  # a view at an offset: kernels read 16 bytes at a time
                t = t.clone()
            args.append(t)
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        with torch.cuda.device(device):
            outs = out if out is not None else [torch.empty(shape, dtype=dt, device=device) for dt, shape in self.arg_types[self.n_inputs :]]
            for i, t in enumerate(args + list(outs)):
                self._pointers[i] = t.data_ptr()
            workspace = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device) if self.workspace_bytes else None
            stream = torch.cuda.current_stream(device).cuda_stream
            _sync_matmul_flags()
            rc = _lib.pt2GpuKernelLaunch(self.handle, self._pointers, workspace.data_ptr() if workspace is not None else None, stream)
        if rc != 0:
            raise _error("launching the GPU kernel")
        return list(outs)


def wait_background():
    """Waits until pt2's background compilation is done: cuDNN plans whose engines compile
    their kernel at run time come after the first calls (runtime/cudnn_graph.c, "Tiers"); the
    next launch times them.  For benchmarks, which measure the steady state."""
    _lib.pt2GpuWaitBackground()


def compile_graph(graph):
    k = _lib.pt2GpuCompileGraph(graph.handle, None)
    if not k:
        raise _error("compiling the graph for the GPU")
    return GpuKernel(k)


def compile_text(text, source_name="<text>", func_name=None, context=None):
    from ._core import Context

    ctx = context or Context.default()
    k = _lib.pt2GpuCompileText(ctx.handle, text.encode(), source_name.encode(), func_name.encode() if func_name else None, None)
    if not k:
        raise _error(f"compiling {source_name} for the GPU")
    return GpuKernel(k)
