"""Whole launch plans without a GPU (runtime/gpu_kernel.c): a stand-in libcuda.so.1
(fake_cuda/fake_cuda.c, found first through LD_LIBRARY_PATH) prints every kernel launch, the
stand-in libcudnn (fake_cudnn/fake_cudnn.c, with its graph API) every cuDNN call, so the order
of what one launch of a compiled plan runs is visible.  Checked: the fold launches in front of a
conv entry (a batch norm's scaled weight and shift, a computed bias; "fold <entry>" in the plan)
run only when the entry's call is cuDNN's legacy fused call, their one reader; with the graph
API's plan the plain conv and the epilogue kernel run instead; a graph plan failing at run time
takes the unfused call and the epilogue kernel that call (its folds did not run); without cuDNN
the fallback loops run without the folds; a CUDA graph capture records the same choice; frozen
parameters (a prologue) keep working.  The results themselves are checked against eager on a GPU
in tests/gpu/test_gpu_conv.py."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_gpu_cudnn_fake import CC, MLIR_INCLUDE, build_fake_cudnn  # noqa: E402

pytestmark = pytest.mark.skipif(not CC or not os.path.isdir(os.path.join(MLIR_INCLUDE, "mlir-c")), reason="needs a C compiler and MLIR's headers")

# Runs in a fresh process (the fake driver must be the libcuda.so.1 that libpt2 opens), one
# scenario after another (PT2_CUDNN_API and FAKE_CUDNN are read at each use, so they change
# between scenarios; each compiles its graph into a new kernel, whose conv entries start unmade):
# prints "scenario <name>" (also to stderr, for the logs), the plan's launch lines as JSON, then
# launches the plan `calls` times on fake device pointers, then (capture) records and replays it
# as a CUDA graph.
SCRIPT = r"""
import ctypes, json, os, sys
import torch, pt2
import pt2._gpu
from pt2._core import _lib

_lib.pt2GpuGraphCapture.restype = ctypes.c_void_p
_lib.pt2GpuGraphCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
_lib.pt2GpuGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_lib.pt2GpuGraphDestroy.argtypes = [ctypes.c_void_p]
F32, F16 = torch.float32, torch.float16


def build(case):
    g = pt2.Graph()
    if case in ("bn", "bn_frozen"):
        x, w = g.input(F32, (4, 8, 96, 96)), g.input(F32, (16, 8, 3, 3))
        params = [g.input(F32, (16,)) for _ in range(4)]
        g.outputs(g.op("relu", g.op("batch_norm", g.op("conv2d", x, w, padding=[1, 1]), *params, eps=1e-5)))
        if case == "bn_frozen":
            for v in [w] + params:
                g.freeze(v)
    elif case == "conv_gemm":  # a 3x3 conv (cuDNN), then a 1x1 one + bn + relu over its NHWC result (a cuBLAS gemm entry)
        x, w0, w = g.input(F32, (4, 8, 96, 96)), g.input(F32, (16, 8, 3, 3)), g.input(F32, (16, 16, 1, 1))
        params = [g.input(F32, (16,)) for _ in range(4)]
        h = g.op("conv2d", x, w0, padding=[1, 1])
        g.outputs(g.op("relu", g.op("batch_norm", g.op("conv2d", h, w), *params, eps=1e-5)))
    elif case == "two_biases":
        x, w, b1, b2 = g.input(F16, (2, 8, 32, 32)), g.input(F16, (8, 8, 3, 3)), g.input(F16, (1, 8, 1, 1)), g.input(F16, (8, 1, 1))
        g.outputs(g.op("relu", g.op("add", g.op("add", g.op("conv2d", x, w, padding=[1, 1]), b1), b2)))
    return g.compile(device="cuda")


for name, s in json.loads(sys.argv[1]).items():
    print(f"scenario {name}", flush=True)
    sys.stderr.write(f"scenario {name}\n")
    sys.stderr.flush()
    os.environ.pop("PT2_CUDNN_API", None)
    if s.get("api"):
        os.environ["PT2_CUDNN_API"] = s["api"]
    os.environ["FAKE_CUDNN"] = s.get("fake", "")
    k = build(s["case"])
    print("plan " + json.dumps([l for l in k.plan.splitlines() if l.startswith("launch ")]), flush=True)
    n = k.n_inputs + k.n_outputs
    pointers = (ctypes.c_void_p * n)(*[0x10000000 * (i + 1) for i in range(n)])
    workspace, stream = 0x7F00000000, 0x777
    for i in range(s.get("calls", 2)):
        print(f"call {i}", flush=True)
        if _lib.pt2GpuKernelLaunch(k.handle, pointers, workspace, stream) != 0:
            sys.exit("launch failed: " + _lib.pt2GetLastError().decode())
    if s.get("tiers"):  # the upgrade thread makes engine 7's plan (0.3 s); the next launch times it
        # (whole lines in one write: the upgrade thread prints too)
        print(f"upgrading {int(k.upgrading)}\n", end="", flush=True)
        pt2._gpu.wait_background()
        print(f"upgrading {int(k.upgrading)}\ncall upgraded\n", end="", flush=True)
        _lib.pt2GpuKernelLaunch(k.handle, pointers, workspace, stream)
        print(f"upgrading {int(k.upgrading)}\n", end="", flush=True)
    if s.get("capture"):
        graph = _lib.pt2GpuGraphCapture(k.handle, pointers, workspace)
        if not graph:
            sys.exit("capture failed: " + _lib.pt2GetLastError().decode())
        print("replay_begin", flush=True)
        _lib.pt2GpuGraphLaunch(graph, stream)
        _lib.pt2GpuGraphDestroy(graph)
"""

EVENTS = ("call", "launch", "graph_execute", "fused", "forward", "capture_begin", "capture_end", "replay_begin", "replay", "upgrading",
          "graph_engine")

# name: the graph, PT2_CUDNN_API, FAKE_CUDNN, launches, capture
SCENARIOS = {
    "graph": dict(case="bn"),
    "legacy": dict(case="bn", api="legacy"),
    "graph_run_fails": dict(case="bn", calls=3, fake="graph_run"),
    "two_biases_graph": dict(case="two_biases"),
    "two_biases_legacy": dict(case="two_biases", api="legacy"),
    "capture_graph": dict(case="bn", calls=1, capture=True),
    "capture_legacy": dict(case="bn", calls=1, capture=True, api="legacy"),
    "frozen_graph": dict(case="bn_frozen"),
    "frozen_legacy": dict(case="bn_frozen", api="legacy"),
    "host_profile": dict(case="bn", calls=12),
    "tiers": dict(case="bn", calls=1, fake="graph_rc", tiers=True, capture=True),
}
WITHOUT_CUDNN = {"no_cudnn": dict(case="bn")}
# no libcublas can load here (a CPU-only torch): a 1x1 conv's gemm entry runs its loops
WITHOUT_CUBLAS = {"conv_gemm_no_cublas": dict(case="conv_gemm"), "conv_gemm_capture_no_cublas": dict(case="conv_gemm", calls=1, capture=True)}


def _cublas_loads():
    import ctypes

    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            pass
    return False


def run_scenarios(lib_dir, cudnn_lib, cache, scenarios):
    """Per scenario: its plan's launch lines, its events in order, and its part of the log."""
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""), PT2_CUDNN_LIBRARY=cudnn_lib,
               PT2_CACHE_DIR=cache, PT2_LOGS="cudnn,gpu-host", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(scenarios)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = {}
    for part in r.stdout.split("scenario ")[1:]:
        name, _, body = part.partition("\n")
        lines = body.splitlines()
        plan = json.loads([line for line in lines if line.startswith("plan ")][0][5:])
        events = [(line.split() + [""])[:2] for line in lines if line.split() and line.split()[0] in EVENTS]
        out[name] = [plan, events, ""]
    for part in r.stderr.split("scenario ")[1:]:
        name, _, body = part.partition("\n")
        out[name][2] = body
    assert set(out) == set(scenarios), (sorted(out), r.stderr[-3000:])
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every scenario, with the fake cuDNN (its graph API) in one process and without cuDNN in another."""
    d = tmp_path_factory.mktemp("fake_libs")
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), os.path.join(HERE, "fake_cuda", "fake_cuda.c")], check=True)
    cudnn_lib, cache = build_fake_cudnn(d, True), str(tmp_path_factory.mktemp("cache"))
    out = run_scenarios(str(d), cudnn_lib, cache, SCENARIOS)
    out.update(run_scenarios(str(d), "/nonexistent/libcudnn.so", cache, WITHOUT_CUDNN))
    if not _cublas_loads() and not os.environ.get("PT2_CUBLAS"):
        out.update(run_scenarios(str(d), cudnn_lib, cache, WITHOUT_CUBLAS))
    return out


class Plan:
    """The kernel names of a plan with one conv entry, by role."""

    def __init__(self, lines):
        self.lines = lines
        entries = [i for i, line in enumerate(lines) if line.split()[1] == "-1"]
        assert len(entries) == 1, lines
        self.entry = entries[0]
        name = lambda line: line.split()[2]  # noqa: E731
        self.folds = [name(line) for line in lines if line.endswith(f" fold {self.entry}")]
        self.loops = [name(line) for line in lines if f" unless {self.entry} result" in line]
        self.epilogue = [name(line) for line in lines if line.endswith(f" unless {self.entry}")]
        assert len(self.folds) + len(self.loops) + len(self.epilogue) + 1 == len(lines), lines


def per_call(events):
    """The events of each `call <i>` (the launches and cuDNN calls of that plan launch)."""
    calls = []
    for word, arg in events:
        if word == "call":
            calls.append([])
        elif word in ("capture_begin", "replay_begin"):
            break
        elif calls:
            calls[-1].append(arg if word == "launch" else word)
    return calls


def test_graph_plan_skips_the_folds_and_runs_the_epilogue(runs):
    """cuDNN's graph API (the default): the plain conv on the unscaled weight, then the epilogue
    kernel (the batch norm and relu); the two fold kernels in front do not run."""
    lines, events, log = runs["graph"]
    p = Plan(lines)
    assert len(p.folds) == 2 and p.epilogue and p.loops, lines
    assert per_call(events) == [["graph_execute"] + p.epilogue] * 2, events
    assert "graph API, engine 42" in log


def test_legacy_fused_call_runs_the_folds(runs):
    """PT2_CUDNN_API=legacy: the fold kernels compute the scaled weight and the shift that
    cuDNN's fused call reads; neither the loops nor the epilogue kernel run."""
    lines, events, _ = runs["legacy"]
    p = Plan(lines)
    assert per_call(events) == [p.folds + ["fused"]] * 2, events


def test_graph_plan_failing_at_run_time(runs):
    """The graph plan fails at the first call, after the plan skipped the folds: that call takes
    the unfused call and the epilogue kernel (never the fused call on folds not computed); the
    next calls run the folds and the fused call."""
    lines, events, log = runs["graph_run_fails"]
    p = Plan(lines)
    assert per_call(events) == [["graph_execute", "forward"] + p.epilogue] + [p.folds + ["fused"]] * 2, events
    assert "the folded operands were not computed for this call" in log


def test_without_cudnn_the_loops_run_without_the_folds(runs):
    """No cuDNN: the conv's fallback loops and the epilogue kernel, which read the unscaled
    weight and the batch norm's parameters themselves: no fold kernel runs."""
    lines, events, _ = runs["no_cudnn"]
    p = Plan(lines)
    assert per_call(events) == [p.loops + p.epilogue] * 2, events


@pytest.mark.parametrize("api", [None, "legacy"])
def test_a_computed_bias_is_a_fold_too(runs, api):
    """relu(conv + b1 + b2): the sum b1 + b2 is one kernel in front of the call, run only for
    the legacy fused call."""
    lines, events, _ = runs["two_biases_" + (api or "graph")]
    p = Plan(lines)
    assert len(p.folds) == 1, lines
    want = p.folds + ["fused"] if api == "legacy" else ["graph_execute"] + p.epilogue
    assert per_call(events) == [want] * 2, events


@pytest.mark.parametrize("api", [None, "legacy"])
def test_cuda_graph_records_the_same_choice(runs, api):
    """mode="reduce-overhead": the entry is made at the warm-up launch; the capture records the
    graph plan and the epilogue kernel without the folds, or the folds and the fused call, and
    the replay runs the recorded kernels."""
    lines, events, _ = runs["capture_" + (api or "graph")]
    p = Plan(lines)
    words = [w for w, _ in events]
    begin, end = words.index("capture_begin"), words.index("capture_end")
    captured = [arg if w == "launch" else w for w, arg in events[begin + 1 : end]]
    want = p.folds + ["fused"] if api == "legacy" else ["graph_execute"] + p.epilogue
    assert captured == want, events
    replayed = [arg for w, arg in events[words.index("replay_begin") + 1 :] if w == "replay"]
    assert replayed == [name for name in want if name not in ("fused", "graph_execute")], events


def test_tiers_upgrade_before_the_capture(runs):
    """cuDNN's first ranked engine compiles at run time (the fake's engine 7, 0.3 s): the first
    launch runs the best of the others (42) while the upgrade thread makes it, and the kernel says
    it is upgrading (mode="reduce-overhead" then puts its capture off, capture/compiled.c) until
    the next launch has timed it; from then on, and in the captured graph, engine 7 runs."""
    lines, events, log = runs["tiers"]
    seq = [(w, a) for w, a in events if w in ("call", "upgrading", "graph_engine", "capture_begin", "capture_end")]
    first = seq.index(("call", "0"))
    assert seq[first + 1] == ("graph_engine", "42"), seq
    assert [a for w, a in seq if w == "upgrading"] == ["1", "1", "0"], seq
    upgraded = seq[seq.index(("call", "upgraded")) + 1 :]
    # the launch after the wait times 42 and 7 (the fake cannot time: a tie, the better ranked
    # wins) and runs 7; the capture records 7
    assert [a for w, a in upgraded if w == "graph_engine"] == ["42", "7", "7", "7"], seq
    assert seq[-3:] == [("capture_begin", ""), ("graph_engine", "7"), ("capture_end", "")], seq
    assert "upgrade: engine 7 from now on" in log


@pytest.mark.parametrize("api", [None, "legacy"])
def test_frozen_parameters_fold_once_in_the_prologue(runs, api):
    """Frozen weight and statistics: pt2-freeze folds the batch norm into the prologue, so the
    plan has no fold launches; the first launch runs the prologue, then the entry."""
    lines, events, _ = runs["frozen_" + (api or "graph")]
    assert not any(" fold " in line for line in lines), lines
    calls = per_call(events)
    assert calls[1] == (["fused"] if api == "legacy" else ["graph_execute"] + [line.split()[2] for line in lines if " unless " in line and " result" not in line])
    assert len(calls[0]) > len(calls[1]) and calls[0][-len(calls[1]):] == calls[1], calls  # the prologue's kernels first


def test_host_profile_after_ten_calls(runs):
    """PT2_LOGS=gpu-host: after 10 launches of a kernel past its first two, its host time a call by kind (fold
    decisions, cuDNN calls, kernels); nothing before (the other scenarios launch fewer times)."""
    log = runs["host_profile"][2]
    lines = [line for line in log.splitlines() if line.startswith("[pt2] gpu-host")]
    assert len(lines) == 1, log[-2000:]
    assert "10 calls after the first two" in lines[0] and "1 cuDNN" in lines[0] and "1 fold decisions" in lines[0], lines[0]
    assert not any("gpu-host" in runs[name][2] for name in ("graph", "legacy", "capture_graph"))


def test_conv_gemm_without_cublas_runs_its_loops(runs):
    """A 1x1 conv + bn + relu over the 3x3 conv's NHWC result is a cuBLAS gemm entry
    (passes/gpu_conv.c) with the conv's loops and epilogue kept behind it, "unless <entry> result"
    and "unless <entry>" as for cuDNN's entries.  Without cuBLAS the entry computes nothing (no
    error): every call runs the loops and the epilogue kernel; the fold kernels in front (the
    scaled weight and shift, which only cuBLASLt's epilogue reads) run, and their results go
    unread.  A CUDA graph capture records the same."""
    if "conv_gemm_no_cublas" not in runs:
        pytest.skip("a libcublas loads here: the fake driver cannot run it")
    lines, events, _ = runs["conv_gemm_no_cublas"]
    entries = [(i, line.split()[2]) for i, line in enumerate(lines) if line.split()[1] == "-1"]
    assert [name for _, name in entries] == ["conv_f32_s1x1_p1x1_d1x1_g1", "gemm_f32_f32_b0_bias_relu_conv_scaled"], lines
    gemm = entries[1][0]
    folds = [line.split()[2] for line in lines if line.endswith(f" fold {gemm}")]
    loops = [line.split()[2] for line in lines if f" unless {gemm} result" in line]
    epilogue = [line.split()[2] for line in lines if line.endswith(f" unless {gemm}")]
    assert len(folds) == 2 and loops and len(epilogue) == 1, lines
    # the input's transpose to NHWC, cuDNN's graph plan for the 3x3 conv, the gemm entry's folds, loops and
    # epilogue, the output's transpose back
    transposes = [line.split()[2] for line in lines if line.split()[1] != "-1" and " unless " not in line and " fold " not in line]
    assert len(transposes) == 2, lines
    want = [transposes[0], "graph_execute"] + folds + loops + epilogue + [transposes[1]]
    assert per_call(events) == [want] * 2, events
    lines, events, _ = runs["conv_gemm_capture_no_cublas"]
    words = [w for w, _ in events]
    captured = [arg if w == "launch" else w for w, arg in events[words.index("capture_begin") + 1 : words.index("capture_end")]]
    assert captured == want, events
