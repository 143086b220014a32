"""Grouped products on the GPU through PyTorch's grouped GEMM (passes/gpu_grouped_mm.c,
runtime/gpu_grouped_mm.c, capture/aten_kernels.cpp, docs/gpu.md "Grouped products"): torch._grouped_mm
of bf16 rows in groups ending at int32 offsets (a mixture of experts' product) is one launch-plan
entry that runs at::_grouped_mm, eager's CUTLASS kernel on sm_90: the same bits as eager where the
operands are aligned, within bf16's rounding of a float64 oracle everywhere, on odd row counts,
empty groups, rows past the last group (eager leaves them unset: not compared), expert weights given
as [G, N, K] and transposed (read in place), an operand starting off 16 bytes (copied first), two
products around a SiLU in one graph, mode="reduce-overhead" with the offsets changing between
replays; f32 and f16 (eager loops over the groups on the host) and PT2_DISABLE=gpu-grouped-mm stay
the gathered contraction, checked against the oracle too.  Skipped without a GPU."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# normwise relative error against the float64 oracle (bf16/f16: one rounding of an f32 sum)
TOL = {F32: 2e-6, F16: 2e-3, BF16: 1e-2}


def sm90():
    return torch.cuda.get_device_capability()[0] in (9, 10)


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float64) * 2 - 1).to(dtype)


def reference(a, b, offs):
    """float64 rows of each group times its matrix; rows past the last offset 0."""
    out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64, device=a.device)
    start = 0
    for g, end in enumerate(offs.tolist()):
        out[start:end] = a[start:end].double() @ b[g].double()
        start = end
    return out


def rel_err(got, exp):
    return ((got.double() - exp.double()).norm() / exp.double().norm().clamp_min(1e-30)).item()


def entries(fn, *args):
    with torch.no_grad():
        e = pt2.explain(fn)(*args)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    plan = _gpu.compile_text(e.graphs[0]).plan
    return [line.split()[2] for line in plan.splitlines() if line.startswith("launch -1 gmm_")]


def transposed(a, bt, offs):
    return torch._grouped_mm(a, bt.transpose(1, 2), offs=offs)


def plain(a, b, offs):
    return torch._grouped_mm(a, b, offs=offs)


CASES = [  # S, K, N, offsets
    (45, 24, 40, [7, 7, 39]),  # an empty group, rows past the last one
    (128, 64, 128, [32, 64, 96, 128]),
    (1, 16, 8, [1]),
    (301, 256, 136, [0, 100, 100, 250, 301, 301]),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}g{len(c[3])}" for c in CASES])
@pytest.mark.parametrize("form", ["transposed", "plain"])
def test_bf16_runs_pytorchs_kernel(case, form):
    S, K, N, ends = case
    a = rand((S, K), BF16, 1)
    w = rand((len(ends), N, K), BF16, 2) if form == "transposed" else rand((len(ends), K, N), BF16, 2)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    fn = transposed if form == "transposed" else plain
    assert entries(fn, a, w, offs) == (["gmm_bf16_i32"] if sm90() else [])
    pt2.reset()
    with torch.no_grad():
        got, exp = pt2.compile(fn)(a, w, offs), fn(a, w, offs)
    b = w.transpose(1, 2) if form == "transposed" else w
    rows = ends[-1]
    assert rel_err(got[:rows], reference(a, b, offs)[:rows]) < TOL[BF16]
    if sm90():
        assert torch.equal(got[:rows], exp[:rows])  # the same kernel on the same operands


def test_operand_off_16_bytes_is_copied():
    """a starting 2 bytes into its buffer (a row slice of a wider tensor keeps 16-byte rows): the
    kernel's operands must start on 16 bytes, so pt2 hands it a copy."""
    S, K, N, ends = 37, 32, 48, [10, 30]
    wide = rand((S, K + 8), BF16, 3)
    w = rand((2, K, N), BF16, 4)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")

    def fn(x, w, offs):
        return torch._grouped_mm(x[:, 1:K + 1], w, offs=offs)

    with torch.no_grad():
        got = pt2.compile(fn)(wide, w, offs)
    assert rel_err(got[:30], reference(wide[:, 1:K + 1], w, offs)[:30]) < TOL[BF16]


def test_experts_around_a_silu_in_one_graph():
    """A mixture of experts' MLP over tokens sorted by expert: gate and up in one product, SiLU, down, the
    residual: two entries, the kernels between them generated."""
    T, H, I, ends = 200, 64, 96, [50, 50, 170, 200]
    x = rand((T, H), BF16, 5)
    w_gate_up = rand((4, 2 * I, H), BF16, 6) * 0.2
    w_down = rand((4, H, I), BF16, 7) * 0.2
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")

    def moe(x, w_gate_up, w_down, offs):
        gate, up = torch._grouped_mm(x, w_gate_up.transpose(1, 2), offs=offs).chunk(2, dim=-1)
        return x + torch._grouped_mm(F.silu(gate) * up, w_down.transpose(1, 2), offs=offs)

    assert entries(moe, x, w_gate_up, w_down, offs) == (["gmm_bf16_i32"] * 2 if sm90() else [])
    pt2.reset()
    with torch.no_grad():
        got, exp = pt2.compile(moe)(x, w_gate_up, w_down, offs), moe(x, w_gate_up, w_down, offs)
    h = reference(x, w_gate_up.transpose(1, 2), offs)
    gate, up = h.chunk(2, dim=-1)
    ref = x.double() + reference((F.silu(gate) * up).to(BF16), w_down.transpose(1, 2), offs)
    assert rel_err(got, ref) < TOL[BF16]
    assert rel_err(got, exp) < TOL[BF16]


def check_decomposed(dtype, seed):
    """No grouped_mm entry, and the gathered contraction's values: the definition's, rows past the last group 0."""
    S, K, N, ends = 45, 24, 40, [7, 7, 39]
    a, bt = rand((S, K), dtype, seed), rand((3, N, K), dtype, seed + 1)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    assert entries(transposed, a, bt, offs) == []
    pt2.reset()
    with torch.no_grad():
        got = pt2.compile(transposed)(a, bt, offs)
    assert rel_err(got[:39], reference(a, bt.transpose(1, 2), offs)[:39]) < TOL[dtype]
    assert not got[39:].any()


@pytest.mark.parametrize("dtype", [F32, F16])
def test_other_types_stay_the_gathered_contraction(dtype):
    check_decomposed(dtype, 8)


def test_switch_decomposes(monkeypatch):
    monkeypatch.setenv("PT2_DISABLE", "gpu-grouped-mm")
    check_decomposed(BF16, 10)


def test_reduce_overhead_records_the_kernel():
    """The CUDA graph records PyTorch's kernel (its allocations served from the graph's pool); new
    offsets in the same input buffer between replays are read on the device."""
    S, K, N, G = 96, 64, 80, 4

    def fn(a, bt, offs):
        return torch.relu(torch._grouped_mm(a, bt.transpose(1, 2), offs=offs))

    c = pt2.compile(fn, mode="reduce-overhead")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "cannot capture a CUDA graph"
        with torch.no_grad():
            for i in range(6):
                a, bt = rand((S, K), BF16, 20 + 2 * i), rand((G, N, K), BF16, 21 + 2 * i)
                cuts = sorted(torch.randint(0, S + 1, (G - 1,), generator=torch.Generator().manual_seed(i)).tolist())
                offs = torch.tensor(cuts + [S], dtype=torch.int32, device="cuda")
                got = c(a, bt, offs)
                ref = reference(a, bt.transpose(1, 2), offs).relu()
                assert rel_err(got, ref) < TOL[BF16], (i, cuts)


def test_routing_with_int_histc_and_capability_in_one_graph():
    """transformers' experts (5.x, experts_implementation="grouped_mm"): tokens sorted by expert, counted
    with torch.histc of int32 ids (CUDA's kernel counts integers; the CPU's raises), the offsets a cumsum
    of the counts, the product picked by torch.cuda.get_device_capability(): one graph, no break, and
    eager's result."""
    T, H, N, E = 70, 32, 48, 4
    x = rand((T, H), BF16, 11)
    w = rand((E, N, H), BF16, 12) * 0.3
    ids = torch.randint(0, E, (T,), device="cuda", generator=torch.Generator(device="cuda").manual_seed(13))

    def experts(x, w, ids):
        order = torch.argsort(ids)
        counts = torch.histc(ids.int(), bins=E, min=0, max=E - 1)
        offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
        if torch.cuda.get_device_capability(x.device)[0] >= 9:
            y = torch._grouped_mm(x[order], w.transpose(1, 2), offs=offs)
        else:
            y = torch.cat([x[order][s:e] @ w[g].t() for g, (s, e) in enumerate(zip([0] + offs[:-1].tolist(), offs.tolist()))])
        return torch.empty_like(y).index_copy_(0, order, y)

    with torch.no_grad():
        exp = experts(x, w, ids)
        e = pt2.explain(experts)(x, w, ids)
        assert e.graph_break_count == 0, e.break_reasons
        pt2.reset()
        got = pt2.compile(experts)(x, w, ids)
    assert rel_err(got, exp) < TOL[BF16]


def test_int_histc_matches_eager_on_cuda():
    """torch.histc of integers on CUDA (the polyfill's bins, integer counts) against eager's."""
    v = torch.randint(-3, 12, (333,), device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    for dtype in (torch.int32, torch.int64):
        x = v.to(dtype)
        for bins, lo, hi in ((9, 0, 8), (4, 1, 10), (1, 2, 5)):
            pt2.reset()
            got = pt2.compile(lambda x: torch.histc(x, bins=bins, min=lo, max=hi))(x)
            exp = torch.histc(x, bins=bins, min=lo, max=hi)
            assert got.dtype == exp.dtype and torch.equal(got, exp), (dtype, bins, lo, hi)
