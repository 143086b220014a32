"""pt2.compile on CUDA tensors (capture/compiled.c's GPU path, docs/gpu.md):
functions and nn.Modules against eager CUDA, device guards (the same code on CPU
and on CUDA compiles one entry each), mixed devices, non-default streams,
torch.compile(backend="pt2"), and mode="reduce-overhead" (CUDA graphs) with
inputs that change values and addresses.  The first tests need no GPU: the
graphs capture makes of these models compile for sm_90."""
import os
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _C, _gpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_models import MLP, Block, Encoder  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def _cpu_kernels_link():
    """Whether CPU kernels with matrix products load here (on scripts/gpu-check's GPU machine they
    do not: libpt2rt's OpenBLAS/oneDNN are not installed there; pointwise kernels would)."""
    try:
        g = pt2.Graph()
        a, b = g.input(torch.float32, (4, 8)), g.input(torch.float32, (8, 4))
        g.outputs(g.op("relu", g.op("matmul", a, b)))
        g.compile()(torch.ones(4, 8), torch.ones(8, 4))
        return True
    except Exception:
        return False


CPU_KERNELS = _cpu_kernels_link()
needs_cpu_kernels = pytest.mark.skipif(not CPU_KERNELS, reason="CPU kernels do not link on this machine")


def rel_err(a, e):
    return ((a.double() - e.double()).norm() / e.double().norm().clamp_min(1e-30)).item()


def close(got, exp, tol=1e-4):
    assert got.device == exp.device, (got.device, exp.device)
    assert got.dtype == exp.dtype and got.shape == exp.shape
    assert rel_err(got, exp) < tol, rel_err(got, exp)


MODELS = {
    "mlp": (lambda: MLP(), (32, 256)),
    "block": (lambda: Block(), (4, 64, 256)),
    "encoder": (lambda: Encoder(layers=2, d=128, heads=4, ff=256), (2, 32, 128)),
}


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


# ---- no GPU needed: what capture builds for these models compiles for the GPU


@needs_cpu_kernels
@pytest.mark.parametrize("name", sorted(MODELS))
def test_captured_model_graphs_compile_for_sm90(name):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    m = make().eval()
    with torch.no_grad():
        e = pt2.explain(m)(torch.randn(shape))
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    k = _gpu.compile_text(e.graphs[0])
    assert k.num_launches >= 3
    assert ".target sm_90" in k.plan and ".visible .entry" in k.plan


# ---- on the GPU


@needs_cuda
def test_function_matches_eager():
    def f(x, w, b):
        y = F.gelu(x @ w + b)
        return torch.softmax(y, dim=-1) * 2, y.sum(dim=0), x.shape[0]

    torch.manual_seed(1)
    x, w, b = (torch.randn(s, device="cuda") for s in [(64, 96), (96, 160), (160,)])
    cf = pt2.compile(f)
    for _ in range(3):  # compile, then cache hits
        got, exp = cf(x, w, b), f(x, w, b)
        close(got[0], exp[0])
        close(got[1], exp[1])
        assert got[2] == 64
    e = pt2.explain(f)(x, w, b)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    assert any("device=cuda:0" in g for g in e.out_guards), e.out_guards


@needs_cuda
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_module_matches_eager(name, dtype):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    m = make().eval().to(device="cuda", dtype=dtype)
    cm = pt2.compile(m)
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    with torch.no_grad():
        for i in range(2):
            x = torch.randn(shape, device="cuda", dtype=dtype)
            close(cm(x), m(x), tol)
        e = pt2.explain(m)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_scalar_operands_as_eager_cuda(dtype):
    """A Python number meeting a CUDA tensor, bit for bit against eager CUDA: add, sub and mul read
    it as f32 on either side, division multiplies by its f32 reciprocal, comparisons and remainder
    round it to the half type (dialects/builder.c's opmath_scalar; the CPU's rules are
    tests/capture/test_capture_half_scalars.py's, whose forms these are)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "capture"))
    from test_capture_half_scalars import unlike_eager

    g = torch.Generator().manual_seed(7)
    x = (torch.randn(2 * 1501, generator=g, dtype=torch.float64) * 10).to(dtype).cuda()[::2]
    for s in (0.3, 1 / 3, 7.1, 1000003):
        bad = unlike_eager(x, s)
        assert not bad, f"s = {s}: elements unlike eager's: {bad}"


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_addcmul_and_alpha_round_once_cuda(dtype):
    """f16/bf16 addcmul/addcdiv and add(alpha=) compute in f32 and round once on CUDA too, alpha
    read in f32 there (capture/rules.c's h_addcmul, h_binary): within one ulp of eager CUDA, whose
    f32 arithmetic may fuse differently (H200, a12e161: 1 element of 4096 one f16 ulp apart at 5.45,
    where the test's first bound, half an ulp, was too tight); the product before was rounded to
    the half type, 26 ulps off on the CPU's fuzzer case."""
    g = torch.Generator().manual_seed(5)
    x, y, z = ((torch.randn(4096, generator=g) * 3).to(dtype).cuda() for _ in range(3))
    z = z.abs() + 0.5
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10  # one unit in the last place, relative
    for fn in (lambda x, y, z: torch.addcmul(x, y, z, value=0.5), lambda x, y, z: torch.addcdiv(x, y, z, value=-1.5),
               lambda x, y, z: torch.add(x, y, alpha=1.7), lambda x, y, z: torch.sub(x, z, alpha=0.3)):
        pt2.reset()
        got, want = pt2.compile(fn)(x, y, z), fn(x, y, z)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.float(), want.float(), rtol=ulp, atol=ulp)


@needs_cuda
def test_outputs_follow_current_stream():
    def f(x):
        return torch.softmax(x * 3, dim=-1)

    cf = pt2.compile(f)
    x = torch.randn(512, 1024, device="cuda")
    exp = f(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = cf(x)
    s.synchronize()
    close(got, exp)


@needs_cuda
def test_device_guard_recompiles_cpu_then_cuda():
    def f(x, y):
        return torch.relu(x @ y) + 1, x.device, x.is_cuda

    cf = pt2.compile(f)
    xc, yc = torch.randn(16, 32), torch.randn(32, 8)
    xg, yg = xc.cuda(), yc.cuda()

    def on_cpu():
        got = cf(xc, yc)
        assert got[1] == torch.device("cpu") and got[2] is False
        close(got[0], f(xc, yc)[0])

    def on_cuda():
        got = cf(xg, yg)
        assert got[1] == torch.device("cuda", 0) and got[2] is True
        close(got[0], f(xg, yg)[0])

    # where CPU kernels cannot link, the CPU call falls back to eager (one warning) after
    # the CUDA entry exists, which must stay in use
    order = [on_cpu, on_cuda] if CPU_KERNELS else [on_cuda, on_cpu]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in order + order:  # compile each, then both entries stay valid
            step()
    assert _C.cache_size(f.__code__) == (2 if CPU_KERNELS else 1)


@needs_cuda
def test_to_device_inside_the_graph():
    def f(x):
        y = x.to(x.device) * 2
        return y.to("cuda") + 1 if x.is_cuda else y

    x = torch.randn(8, 8, device="cuda")
    close(pt2.compile(f)(x), f(x))
    e = pt2.explain(f)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)

    def g(x):
        return (x * 2).to("cpu") + 1  # leaves the GPU: not in a CUDA graph

    close(pt2.compile(g)(x), g(x))


@needs_cuda
def test_mixed_devices_never_wrong():
    def f(x, s):
        return x * s + 1

    x, s = torch.randn(64, device="cuda"), torch.tensor(3.0)  # a CPU scalar tensor: legal in eager
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        close(pt2.compile(f)(x, s), f(x, s))
        close(pt2.compile(f)(x, s), f(x, s))
    assert not [m for m in w if "pt2" in str(m.message)]
    e = pt2.explain(f)(x, s)  # copied to the device at each call (capture/places.c): one graph
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)

    m = torch.nn.Linear(64, 4)  # parameters on the CPU, input on the GPU: eager raises, so must pt2
    with pytest.raises(RuntimeError):
        m(x)
    with pytest.raises(RuntimeError):
        pt2.compile(m)(x)


@needs_cuda
def test_factories_follow_their_device_argument():
    """A factory makes its tensor where eager does: device= (or the CPU without it), whatever the
    graph's device; a mask built from factories alone lands on CUDA (HF models' causal masks)."""
    def mask(n, device):
        m = torch.full((n, n), torch.finfo(torch.float32).min, device=device)
        return m * (torch.arange(n, device=device)[None, :] > torch.arange(n, device=device)[:, None])

    def positions(x):
        p = torch.arange(0, x.shape[-1], 2.0, dtype=torch.float32)  # on the CPU in eager
        return x + p.to(x.device).repeat_interleave(2)[: x.shape[-1]]

    def cpu_scratch(x):
        return x * 2, torch.zeros(3)  # the second output stays on the CPU

    for device in ("cuda", torch.device("cuda:0"), "cpu"):
        got, exp = pt2.compile(mask)(5, device), mask(5, device)
        assert got.device == exp.device and torch.equal(got, exp)
    x = torch.randn(4, 6, device="cuda")
    got, exp = pt2.compile(positions)(x), positions(x)
    assert got.device == exp.device and torch.equal(got, exp)
    got, exp = pt2.compile(cpu_scratch)(x), cpu_scratch(x)
    assert [t.device for t in got] == [t.device for t in exp] and all(torch.equal(a, b) for a, b in zip(got, exp))


@needs_cuda
def test_noncontiguous_and_mutated_inputs():
    def f(x, acc):
        acc.add_(x.sum(dim=0))
        return torch.tanh(x) * 2

    base = torch.randn(48, 64, device="cuda")
    x = base.t()  # strides (1, 64)
    acc, acc_e = torch.zeros(48, device="cuda"), torch.zeros(48, device="cuda")
    cf = pt2.compile(f)
    for _ in range(2):
        got, exp = cf(x, acc), f(x, acc_e)
        close(got, exp)
        close(acc, acc_e)


@needs_cuda
@pytest.mark.parametrize("abi", [True, False], ids=["tensor_abi", "attributes"])
def test_tensor_metadata_paths_on_cuda(abi):
    """Tensor metadata from torch's TensorImpl (capture/tensor_abi.cpp) and through Python attributes
    agree with torch on CUDA tensors (device index, strides, data pointer), and compiled calls on
    either path match eager with outputs on the inputs' device, in one cache entry."""
    if not hasattr(_C, "tensor_abi"):
        pytest.skip("pt2._C is a stub here")
    try:
        was = _C.tensor_abi(abi)
    except RuntimeError:
        pytest.skip("pt2._C was built without capture/tensor_abi.cpp")
    try:
        cases = (torch.randn(6, 8, device="cuda").t()[1:], torch.zeros(3, dtype=torch.int64, device="cuda"),
                 torch.tensor(2.0, device="cuda"), torch.randn(5, device="cuda", dtype=torch.float16)[::2])
        for t in cases:
            m = _C._tensor_meta(t)
            assert (m["device"], m["sizes"], m["strides"], m["data_ptr"]) == (t.get_device(), tuple(t.shape), t.stride(), t.data_ptr())

        def f(x, y):
            return torch.relu(x * 2 + y), (x - y).sum(dim=0)

        x, y = torch.randn(48, 64, device="cuda").t(), torch.randn(64, 48, device="cuda")
        cf = pt2.compile(f)
        for _ in range(3):
            for got, exp in zip(cf(x, y), f(x, y)):
                close(got, exp)
        assert _C.cache_size(f.__code__) == 1
    finally:
        _C.tensor_abi(was)


@needs_cuda
def test_torch_compile_backend_pt2_on_cuda():
    torch.manual_seed(0)
    m = MLP().cuda().eval()
    x = torch.randn(32, 256, device="cuda")
    with torch.no_grad():
        exp = m(x)
        torch._dynamo.reset()
        close(torch.compile(m, backend="pt2")(x), exp)
        torch._dynamo.reset()
        c = torch.compile(m, backend="pt2", mode="reduce-overhead")
        for _ in range(3):
            close(c(x), exp)
        torch._dynamo.reset()


# ---- mode="reduce-overhead": CUDA graphs


def _captures(capfd):
    return capfd.readouterr().err.count("captured a CUDA graph")


@needs_cuda
def test_reduce_overhead_inputs_change_values_and_addresses(capfd, monkeypatch):
    monkeypatch.setenv("PT2_LOGS", "cudagraphs")

    def f(x, w):
        return torch.softmax(x @ w, dim=-1) + x.sum(dim=-1, keepdim=True)

    cf = pt2.compile(f, mode="reduce-overhead")
    torch.manual_seed(0)
    w = torch.randn(128, 96, device="cuda")
    outs, exps = [], []
    for _ in range(6):  # a new tensor (address and values) each call
        x = torch.randn(64, 128, device="cuda")
        outs.append(cf(x, w))
        exps.append(f(x, w))
    torch.cuda.synchronize()
    for o, e in zip(outs, exps):  # earlier results are not overwritten by later replays
        close(o, e)
    assert len({o.data_ptr() for o in outs}) == len(outs)
    x.mul_(2)  # same address, new values
    close(cf(x, w), f(x, w))
    w.add_(0.5)  # read in place: its new values count
    close(cf(x, w), f(x, w))
    w2 = torch.randn_like(w)  # moved: captured again, copied from then on
    close(cf(x, w2), f(x, w2))
    close(cf(x, w), f(x, w))
    # first call: warm-up + capture (x, w in place); second: x moved (output set 0 handed out);
    # third: set 0's results held in `outs`, so output set 1 is recorded; from the fourth on both
    # sets' results are held and the calls launch without a graph (w2's move needs no capture)
    assert _captures(capfd) == 3


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reduce_overhead_module(dtype, capfd, monkeypatch):
    monkeypatch.setenv("PT2_LOGS", "cudagraphs")
    torch.manual_seed(0)
    m = Block().cuda().eval().to(dtype)
    cm = pt2.compile(m, mode="reduce-overhead")
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    with torch.no_grad():
        for i in range(4):
            x = torch.randn(4, 64, 256, device="cuda", dtype=dtype)
            close(cm(x), m(x), tol)
        m.fc2.weight.mul_(0.5)  # parameters are read in place by the graph
        close(cm(x), m(x), tol)
    assert _captures(capfd) == 2  # the first call, then the input moved once


@needs_cuda
def test_reduce_overhead_hands_out_static_outputs(capfd, monkeypatch):
    """Replays return the graph's static outputs (no copy) when nothing holds the last results:
    a dropped result's memory comes back, `y = f(x)` alternates between two output sets, and
    results still held (the tensor, a view of it, a detached alias) are never overwritten."""
    monkeypatch.setenv("PT2_LOGS", "cudagraphs")

    def f(x, w):
        return torch.tanh(x @ w) * 2, x.sum(dim=0)

    cf = pt2.compile(f, mode="reduce-overhead")
    torch.manual_seed(0)
    w = torch.randn(96, 80, device="cuda")
    xs = [torch.randn(33, 96, device="cuda") for _ in range(8)]
    cf(xs[0], w)  # warm-up + capture
    ptrs = set()
    for x in xs:  # results dropped at once: one set serves every call
        a, b = cf(x, w)
        close(a, f(x, w)[0]), close(b, f(x, w)[1])
        ptrs.add(a.data_ptr())
        del a, b
    assert len(ptrs) == 1
    y = None
    seen = []
    for x in xs:  # the previous result alive during the call: two sets, alternating
        y = cf(x, w)
        seen.append(y[0].data_ptr())
        close(y[0], f(x, w)[0])
    assert len(set(seen)) == 2 and seen[0] != seen[1] and seen[0] == seen[2]
    del y
    for hold in ("tensor", "view", "detached"):
        kept, wants = [], []
        for x in xs[:5]:  # more results held than sets: later calls launch into fresh outputs
            a, b = cf(x, w)
            kept.append({"tensor": a, "view": a[1:, ::2], "detached": a.detach()}[hold])
            wants.append({"tensor": lambda t: t, "view": lambda t: t[1:, ::2], "detached": lambda t: t}[hold](f(x, w)[0]))
            del a, b
        torch.cuda.synchronize()
        for got, want in zip(kept, wants):
            close(got, want)
        kept.clear()
    err = capfd.readouterr().err
    assert "results of both CUDA graphs are still held" in err
    assert err.count("captured a CUDA graph") == 3  # warm-up (x in place); x moved; set 1


@needs_cuda
def test_reduce_overhead_and_default_share_code():
    def f(x):
        return torch.relu(x) * 3

    x = torch.randn(1000, device="cuda")
    a, b = pt2.compile(f, mode="reduce-overhead"), pt2.compile(f)
    for _ in range(3):
        close(a(x), f(x))
        close(b(x), f(x))
        y = torch.randn(1000, device="cuda")
        close(a(y), f(y))


# ---- global-state queries (capture/queries.c): torch.cuda.is_current_stream_capturing()


def _capturing_branch(x):
    y = x * 2
    try:  # transformers' is_tracing() shape
        capturing = torch.cuda.is_current_stream_capturing()
    except Exception:
        capturing = False
    if capturing:
        return y - 1, True
    return y + 1, False


@needs_cuda
def test_stream_capture_query_is_one_graph_and_guarded():
    """On a CUDA build the probe is the C function torch._C._cuda_isCurrentStreamCapturing:
    answered at trace time (no break) and guarded (a QUERY guard)."""
    x = torch.randn(257, device="cuda")
    with torch.no_grad():
        e = pt2.explain(_capturing_branch)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    assert any(g.startswith("QUERY") and "_cuda_isCurrentStreamCapturing() == False" in g for g in e.out_guards), e.out_guards


@needs_cuda
def test_stream_capture_query_inside_cuda_graph_capture():
    """Called inside the user's own torch.cuda.graph capture, the guard sees
    True: the call recompiles (or runs eagerly), never the stale answer.  The
    capture is relaxed: what pt2 does to compile a new entry (loading a
    module, uploading constants) is not a stream operation."""
    f = pt2.compile(_capturing_branch)
    x = torch.randn(257, device="cuda")
    with torch.no_grad():
        out, flag = f(x)
        assert flag is False
        close(out, x * 2 + 1)
        static_x = x.clone()
        g = torch.cuda.CUDAGraph()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fallback to eager may warn
            with torch.cuda.graph(g, capture_error_mode="relaxed"):
                cap_out, cap_flag = f(static_x)
        assert cap_flag is True
        static_x.copy_(torch.randn(257, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        close(cap_out, static_x * 2 - 1)
        out, flag = f(x)  # outside again: the first entry, still right
        assert flag is False
        close(out, x * 2 + 1)


# ---- "cuda" without an index: the current device, guarded (docs/capture.md, "Global-state queries")


_CUDA = torch.device("cuda")  # a global device object (one made inside the frame is a graph break)


def _index_less(x):
    return x.to("cuda") * 2 + torch.ones(x.shape, device="cuda") + torch.arange(x.shape[-1], device=_CUDA)


@needs_cuda
def test_index_less_cuda_is_guarded_on_the_current_device():
    """One graph, eager's result, and one QUERY guard on torch's C probe; a
    graph without an index-less "cuda" (on CUDA tensors too) has none."""
    x = torch.randn(4, 6, device="cuda")
    close(pt2.compile(_index_less)(x), _index_less(x))
    e = pt2.explain(_index_less)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    assert [g for g in e.out_guards if "_cuda_getDevice" in g] == [
        f"QUERY torch._C._cuda_getDevice() == {torch.cuda.current_device()}"], e.out_guards
    plain = pt2.explain(lambda x: x * 2 + 1)(x)
    assert not any("_cuda_getDevice" in g for g in plain.out_guards), plain.out_guards


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_set_device_recompiles_index_less_cuda():
    """After torch.cuda.set_device (or inside torch.cuda.device(i)) "cuda" is
    another device in eager: factories and .to("cuda") follow it, never the
    device of the first trace."""
    def make(n):
        return torch.ones(n, device="cuda") * 2 + torch.arange(n, device="cuda")

    def move(x):
        return x.to("cuda") + 1

    f, g = pt2.compile(make), pt2.compile(move)
    x0 = torch.randn(5, device="cuda:0")
    prev = torch.cuda.current_device()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a break on the move to another device may warn
            for dev in (0, 1, 0, 1):
                torch.cuda.set_device(dev)
                got, exp = f(7), make(7)
                assert got.device == torch.device("cuda", dev)
                close(got, exp)
                close(g(x0), move(x0))
            with torch.cuda.device(0):
                close(f(7), make(7))
        assert _C.cache_size(make.__code__) == 2
    finally:
        torch.cuda.set_device(prev)


@needs_cuda
@pytest.mark.parametrize("mode,scale", [("nearest", 1.1), ("nearest", 2.2), ("nearest", 2.0), ("nearest", (1.1, 2.2)),
                                        ("bilinear", 1.1), ("bilinear", (1.1, 1.7)), ("bilinear", 2.0)])
def test_interpolate_scale_factors_as_eager_cuda(mode, scale):
    """interpolate by a scale factor whose output keeps or doubles a size: ATen's CUDA kernels of
    nearest take i where a size is kept and apply the scale where it doubles (its CPU kernels take
    i >> 1), linear copies where no size changes: python/pt2/_polyfills_resample.py follows each
    device (on the H200 at 26b0422 nearest applied the scale to a kept size: fixed)."""
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32, device="cuda").reshape(2, 3, 4, 5)
    x[0, 0, 1, 2] = float("inf")
    f = lambda x: F.interpolate(x, scale_factor=scale, mode=mode)  # noqa: E731
    got, want = pt2.compile(f)(x), f(x)
    assert got.shape == want.shape and torch.allclose(got, want, equal_nan=True), (got[0, 0], want[0, 0])


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_native_norm_statistics_as_eager_cuda(dtype):
    """ATen's CUDA kernels save their statistics in the accumulate type (float32 for a 16-bit input),
    batch norm's in eval the running mean and 1 / sqrt(running var + eps), where its CPU kernels use
    the input's or the running statistics' dtype and save none in eval (the OpInfo runs on the H100 at
    49e38e6 and 30f6b0c found both)."""
    x = torch.randn(3, 6, 7, device="cuda", dtype=dtype)
    w, b = torch.randn(7, device="cuda", dtype=dtype), torch.randn(7, device="cuda", dtype=dtype)
    rm, rv = torch.randn(6, device="cuda", dtype=dtype), torch.rand(6, device="cuda", dtype=dtype) + 0.5
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    ln = lambda t: torch.native_layer_norm(t, [7], w, b, 1e-5)  # noqa: E731
    for got, want in zip(pt2.compile(ln)(x), ln(x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    for training in (False, True):
        bn = lambda t, m, v: torch.native_batch_norm(t, None, None, m, v, training, 0.1, 1e-5)  # noqa: E731
        m2, v2 = rm.clone(), rv.clone()
        got, want = pt2.compile(bn)(x, m2, v2), bn(x, rm, rv)
        for i, (g, e) in enumerate(zip(got, want)):
            assert g.dtype == e.dtype and g.shape == e.shape, (training, i, g.dtype, e.dtype, g.shape, e.shape)
            torch.testing.assert_close(g, e, rtol=tol, atol=tol)
        torch.testing.assert_close(m2, rm, rtol=tol, atol=tol)
        torch.testing.assert_close(v2, rv, rtol=tol, atol=tol)


@needs_cuda
def test_batch_norm_modules_in_training_mode_cuda():
    """A model left in training mode under no_grad: one graph updating the running statistics (batch
    and instance norms) and num_batches_tracked in place, call after call, as eager CUDA."""
    import copy
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.BatchNorm2d(8, momentum=0.3),
                            torch.nn.InstanceNorm2d(8, track_running_stats=True, affine=True)).cuda().train()
    ref = copy.deepcopy(m)
    c = pt2.compile(m)
    with torch.no_grad():
        for i in range(3):
            x = torch.randn(4, 3, 11, 9, device="cuda")
            close(c(x), ref(x))
        assert pt2.explain(copy.deepcopy(m))(x).graph_break_count == 0
    for (k, a), (_, e) in zip(m.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5, msg=k)
