"""runtime/cudnn.c without a GPU: a stand-in libcudnn (fake_cudnn/fake_cudnn.c) prints every
call, and fake_cudnn/probe.c calls pt2_cudnn_conv as a launch plan would.  Checks what cuDNN
is asked for (descriptors from the operands' sizes and strides, the padding, stride, dilation,
groups, cross-correlation, compute and math types, TF32, the first ranked algorithm that works
and fits the scratch, the fused call's activation, bias, residual and weights, the unscaled
weight of a folded batch norm for the unfused call) and that every
failure (no library, cudnnCreate, no algorithm, the fused call, the plain call, the stream)
leaves the work to the plan's loops instead of failing the launch.  The fake is built twice:
without the graph (backend) API, so that runtime/cudnn_graph.c finds none and the legacy calls
run, as with a cuDNN without it; and with a minimal one (-DFAKE_GRAPH_API), so that the graph
plan runs, fails at make or at run time.  The probe asks, as the launch plan does, whether an
entry's fold launches (the scaled weight, a computed bias) run before each call: only for the
legacy fused call, their one reader.  The real library runs in tests/gpu/test_gpu_conv.py on a
GPU; tests/gpu/test_gpu_plan_fake.py runs whole launch plans on these fakes."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
MLIR_INCLUDE = "/usr/lib/llvm-22/include"


def fake_cuda_env(tmp_path, **extra):
    """The environment of a subprocess that finds the stand-in libcuda.so.1 (fake_cuda/fake_cuda.c, built into
    tmp_path) first, with a kernel cache of its own and this process's sys.path."""
    fake = os.path.join(HERE, "fake_cuda", "fake_cuda.c")
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), fake], check=True)
    return dict(os.environ, LD_LIBRARY_PATH=str(tmp_path) + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""),
                PT2_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(sys.path), **extra)

pytestmark = pytest.mark.skipif(not CC or not os.path.isdir(os.path.join(MLIR_INCLUDE, "mlir-c")), reason="needs a C compiler and MLIR's headers")

# cudnnDataType_t, cudnnMathType_t as the fake prints them
FLOAT, DOUBLE, HALF, BFLOAT16 = 0, 1, 2, 9
DEFAULT_MATH, TENSOR_OP_MATH, FMA_MATH = 0, 1, 3


def build_fake_cudnn(d, graph_api):
    """The stand-in libcudnn in directory d, with or without the graph API; its path."""
    lib = os.path.join(str(d), "libfakecudnn_graph.so" if graph_api else "libfakecudnn.so")
    subprocess.run([CC, "-shared", "-fPIC", "-o", lib, os.path.join(HERE, "fake_cudnn", "fake_cudnn.c")] + (["-DFAKE_GRAPH_API"] if graph_api else []),
                   check=True)
    return lib


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("fake_cudnn")
    lib, graph_lib, probe = build_fake_cudnn(d, False), build_fake_cudnn(d, True), str(d / "probe")
    subprocess.run([CC, "-o", probe, os.path.join(HERE, "fake_cudnn", "probe.c"), os.path.join(ROOT, "runtime", "cudnn.c"),
                    os.path.join(ROOT, "runtime", "cudnn_graph.c"), os.path.join(ROOT, "runtime", "dylib.c"),
                    os.path.join(ROOT, "runtime", "threads.c"), "-I" + os.path.join(ROOT, "runtime"), "-I" + os.path.join(ROOT, "include"),
                    "-I" + MLIR_INCLUDE, "-ldl", "-lpthread"], check=True)
    return lib, graph_lib, probe


def probe(built, entry, tf32="00", fake="", library=None, n_operands=None, x_offset=0, layout="nchw", graph=False, api=None,
          folds=None, entries=1, prefetch=False, env_extra=None):
    """Runs the probe: `graph` with the fake's graph API, `api` as PT2_CUDNN_API, `folds` "1"
    for an entry with fold launches that its name does not show (a computed bias)."""
    lib, graph_lib, exe = built
    env = dict(os.environ, PT2_CUDNN_LIBRARY=library or (graph_lib if graph else lib), FAKE_CUDNN=fake, PT2_LOGS="cudnn",
               PROBE_X_OFFSET=str(x_offset), PROBE_LAYOUT=layout, PROBE_FOLDS=folds or "0",
               PROBE_ENTRIES=str(entries), PROBE_PREFETCH={True: "1", False: "0"}.get(prefetch, prefetch), PT2_CUDNN_THREADS="2")
    env.pop("PT2_CUDNN_API", None)
    for name in ("PT2_CUDNN_TIERED", "PT2_CUDNN_RUNTIME_COMPILE", "PT2_CUDNN_BENCHMARK", "PROBE_WAIT", "PROBE_ALLOC"):
        env.pop(name, None)
    env.update(env_extra or {})
    if api:
        env["PT2_CUDNN_API"] = api
    args = [exe, entry, tf32] + ([str(n_operands)] if n_operands is not None else [])
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    results = [tuple(int(v) for v in line.split()[3::2]) for line in lines if line.startswith("call ")]  # (rc, done)
    return lines, results, r.stderr


def starting(lines, word):
    return [line for line in lines if line.split()[0] == word]


def folds_ran(lines):
    """Per call, whether the plan would run the entry's fold launches (probe's "fold" lines)."""
    rows = [line.split() for line in starting(lines, "fold")]
    assert all(r[3] == "0" for r in rows), rows  # rc
    return [int(r[5]) for r in rows]


def test_plain_conv_f32(built):
    """Descriptors from the operands, FMA math without TF32 (the tensor-op algorithm 6 and the
    failing 7 skipped), beta 0, made once for two calls."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1")
    assert results == [(0, 1), (0, 1)]
    tensors = starting(lines, "tensor")
    assert [t.split(" ", 2)[2] for t in tensors] == [f"type {FLOAT} dims 2 4 9 9 strides 324 81 9 1",
                                                     f"type {FLOAT} dims 2 6 9 9 strides 486 81 9 1"]
    assert starting(lines, "filter")[0].endswith(f"type {FLOAT} format 0 dims 6 4 3 3")
    assert starting(lines, "conv") == [f"conv pad 1 1 stride 1 1 dilation 1 1 mode 1 compute {FLOAT}"]
    assert starting(lines, "groups") == ["groups 1"] and len(starting(lines, "get_algorithm")) == 1
    assert set(starting(lines, "math")) == {f"math {FMA_MATH}"}
    forwards = starting(lines, "forward")
    assert len(forwards) == 2 and all(f == "forward algo 1 x 0x100000 w 0x200000 y 0x300000 ws 0x600000 1024 alpha 1 beta 0" for f in forwards)
    assert "algorithm 1, workspace 1024 of 33554432 bytes" in log


def test_channels_last_activations(built):
    """x, y and the residual stored NHWC (pt2-channels-last): tensor descriptors with those
    strides, the weight still an NCHW (KCRS) filter, the fused call as before."""
    lines, results, _ = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1_bias_res_relu", layout="nhwc")
    assert results == [(0, 2), (0, 2)]
    tensors = [t.split(" ", 2)[2] for t in starting(lines, "tensor")]
    assert tensors[:2] == [f"type {FLOAT} dims 2 4 9 9 strides 324 1 36 4", f"type {FLOAT} dims 2 6 9 9 strides 486 1 54 6"]
    assert f"type {FLOAT} dims 2 6 9 9 strides 486 1 54 6" in tensors[2:]  # the residual (z)
    assert starting(lines, "filter")[0].endswith(f"type {FLOAT} format 0 dims 6 4 3 3")


def test_channels_last_one_pixel_result(built):
    """A channels-last [2, 6, 1, 1] result (stride 9 over 9x9) is an NCHW-packed descriptor:
    its unit dims get the strides packed data has there, never a stride below the channels'."""
    lines, results, _ = probe(built, "conv_f32_s9x9_p0x0_d1x1_g1", layout="nhwc")
    assert results == [(0, 1), (0, 1)]
    tensors = [t.split(" ", 2)[2] for t in starting(lines, "tensor")]
    assert tensors == [f"type {FLOAT} dims 2 4 9 9 strides 324 1 36 4", f"type {FLOAT} dims 2 6 1 1 strides 6 1 1 1"]


def test_tf32_switch_remakes_the_descriptors(built):
    """With TF32 allowed, f32 asks for default math and takes the tensor-op algorithm."""
    lines, results, _ = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="011")
    assert results == [(0, 1)] * 3
    assert len(starting(lines, "get_algorithm")) == 2
    forwards = starting(lines, "forward")
    assert forwards[0].startswith("forward algo 1 ") and forwards[1].startswith("forward algo 6 ") and forwards[2].startswith("forward algo 6 ")
    maths = starting(lines, "math")
    assert f"math {DEFAULT_MATH}" in maths and maths[-1] == f"math {TENSOR_OP_MATH}"


def test_fused_f16_grouped_strided(built):
    """relu(conv + bias + residual) in f16: compute in f32, tensor-op math, RELU propagating
    NaN, the residual as z with weight 1, the bias [6] as [1, 6, 1, 1]."""
    lines, results, log = probe(built, "conv_f16_s2x2_p1x1_d1x1_g2_bias_res_relu")
    assert results == [(0, 2), (0, 2)]
    assert starting(lines, "conv") == [f"conv pad 1 1 stride 2 2 dilation 1 1 mode 1 compute {FLOAT}"]
    assert starting(lines, "groups") == ["groups 2"] and starting(lines, "filter")[0].endswith(f"type {HALF} format 0 dims 6 2 3 3")
    dims = [t.split(" ", 2)[2] for t in starting(lines, "tensor")]
    assert f"type {HALF} dims 1 6 1 1 strides 6 1 1 1" in dims and f"type {HALF} dims 2 6 5 5 strides 150 25 5 1" in dims
    assert starting(lines, "activation") == ["activation 1 nan 1 coef_max 1"]
    fused = starting(lines, "fused")
    assert len(fused) == 2 and not starting(lines, "forward")
    assert fused[0] == "fused algo 6 x 0x100000 w 0x200000 z 0x500000 bias 0x400000 y 0x300000 ws 0x600000 16777216 alpha1 1 alpha2 1 z_is_y_desc 0"
    assert "epilogue fused" in log


def test_bias_only_keeps_the_ranked_algorithm(built):
    """IDENTITY runs only with IMPLICIT_PRECOMP_GEMM (1); where cuDNN ranked another algorithm
    first (here 6, tensor ops), forcing 1 would run a slower kernel than the epilogue kernel
    costs (on the H200 a CUDA-core one for f32 1x1 convs), so the plain call runs with the
    ranked algorithm and the plan's epilogue kernel adds the bias (done 1)."""
    lines, results, log = probe(built, "conv_bf16_s1x1_p1x1_d1x1_g1_bias")
    assert results == [(0, 1), (0, 1)]
    assert not starting(lines, "fused") and not starting(lines, "activation")
    assert starting(lines, "forward")[0].startswith("forward algo 6 x 0x100000 w 0x200000 y 0x300000 ")
    assert "epilogue as a kernel" in log


def test_fused_refused_then_plain_and_epilogue_kernel(built):
    """A refused fused call is not tried again: the plain call computes the conv (done 1: the
    plan runs the epilogue kernel)."""
    lines, results, log = probe(built, "conv_bf16_s1x1_p1x1_d1x1_g1_bias_relu", tf32="000", fake="fused")
    assert results == [(0, 1)] * 3
    assert len(starting(lines, "fused")) == 1 and len(starting(lines, "forward")) == 3
    assert "the fused call failed (FAKE_FAILURE)" in log


def test_scaled_weight_fused(built):
    """A "_scaled" entry (a batch norm folded into the weight by pt2-gpu-extern-conv): the fused
    call reads the scaled weight (operand 1); the unscaled one (before the scratch) is unused."""
    lines, results, log = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1_bias_res_relu_scaled")
    assert results == [(0, 2), (0, 2)] and folds_ran(lines) == [1, 1]  # the fused call reads the folds
    fused = starting(lines, "fused")
    assert len(fused) == 2 and not starting(lines, "forward")
    assert fused[0].startswith("fused algo 6 x 0x100000 w 0x200000 z 0x500000 bias 0x400000 y 0x300000 ws 0x600000 ")
    assert starting(lines, "filter")[0].endswith(f"type {HALF} format 0 dims 6 4 3 3") and "epilogue fused" in log


def test_graph_plan_shared_by_identical_convolutions(built):
    """Three entries of one convolution (a network's repeated blocks) share one plan: its
    descriptors are made once, each entry runs it on its own y (its own variant pack).  A TF32
    switch makes every entry take the TF32 plan, made once too, and the plan they left is
    destroyed with its last user: every descriptor made is destroyed once."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="01", graph=True, entries=3)
    assert results == [(0, 1)] * 6
    assert len(starting(lines, "graph_tensor")) == 6  # x, w, y of two plans
    ys = [line.split()[6] for line in starting(lines, "graph_execute")]
    assert ys == ["0x300000", "0x1300000", "0x2300000"] * 2, ys
    assert log.count("a plan chosen before (prefetched, or an identical convolution's)") == 4
    made, destroyed = ([line.split()[1] for line in starting(lines, w)] for w in ("graph_create", "graph_destroy"))
    assert sorted(made) == sorted(destroyed)  # as many destroys as creates, address by address


def test_graph_plan_prefetched_at_load(built):
    """A plan's load prepares its convolutions' candidate plans ahead (pt2_cudnn_prefetch, on
    worker threads with cuDNN handles of their own): three entries of one convolution make one
    plan there, before any call; the calls then only pick it (no new descriptors) and run it
    on each entry's own y.  Every descriptor made is destroyed once."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="00", graph=True, entries=3, prefetch=True)
    assert results == [(0, 1)] * 6
    at = lines.index("prefetched")
    assert len(starting(lines, "graph_tensor")) == 3 and all(lines.index(t) < at for t in starting(lines, "graph_tensor"))
    assert "3 convolution(s), 1 new plan(s) prepared on 1 thread(s)" in log
    assert len(starting(lines, "create")) == 3  # pt2's handle and two workers'
    ys = [line.split()[6] for line in starting(lines, "graph_execute")]
    assert ys == ["0x300000", "0x1300000", "0x2300000"] * 2, ys
    made, destroyed = ([line.split()[1] for line in starting(lines, w)] for w in ("graph_create", "graph_destroy"))
    assert sorted(made) == sorted(destroyed)


def test_graph_plan_prefetched_while_compiling(built):
    """A compile starts the plans on a thread of its own (pt2_cudnn_prefetch_async, told by
    pt2-gpu-extern-conv); the load's prefetch waits for it and finds the plan made, so it
    prepares none; the calls pick that plan.  Every descriptor made is destroyed once."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="00", graph=True, entries=3, prefetch="async")
    assert results == [(0, 1)] * 6
    assert "3 convolution(s), 1 new plan(s) prepared" in log and "3 convolution(s), 0 new plan(s) prepared" in log
    assert len(starting(lines, "graph_tensor")) == 3
    made, destroyed = ([line.split()[1] for line in starting(lines, w)] for w in ("graph_create", "graph_destroy"))
    assert sorted(made) == sorted(destroyed)


def engines(lines):
    """The engine each call ran (the last execution before its "call" line; with graph_rc the
    fake prints each execution's engine, the timing's runs too)."""
    ran, last = [], None
    for line in lines:
        if line.startswith("graph_engine "):
            last = int(line.split()[1])
        elif line.startswith("call "):
            ran.append(last)
    return ran


@pytest.mark.parametrize("prefetch", [False, True, "async"])
def test_tiers_engines_that_compile_come_later(built, prefetch):
    """cuDNN ranks first an engine that compiles at run time (7), then one that does not (42):
    the first calls run 42 and the upgrade thread makes 7's plan meanwhile; the first call after
    it is made times both (the fake cannot time: a tie, which the better ranked wins) and runs 7
    from then on, on every entry of the convolution.  The upgrade thread has a cuDNN handle of
    its own; every descriptor made is destroyed once."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="000", graph=True, entries=2, prefetch=prefetch,
                                env_extra={"FAKE_CUDNN": "graph_rc", "PROBE_WAIT": "0"})
    assert results == [(0, 1)] * 6
    assert engines(lines) == [42, 42, 7, 7, 7, 7], lines  # engine 7's plan takes the fake 0.3 s
    assert "upgrading 1" in lines and "waited upgrading 1" in lines  # made, not yet timed
    assert "pt2 cudnn: upgrade: engine 7 from now on" in log
    assert log.count("timing the plan and 1 that compile at run time") == 1
    created = len(starting(lines, "create"))
    assert created == (2 if not prefetch else 4)  # pt2's handle, the upgrade thread's (and two workers')
    made, destroyed = ([line.split()[1] for line in starting(lines, w)] for w in ("graph_create", "graph_destroy"))
    assert sorted(made) == sorted(destroyed)


@pytest.mark.parametrize("env", [{"PT2_CUDNN_TIERED": "0"}, {"PT2_CUDNN_RUNTIME_COMPILE": "0"}])
def test_tiers_off(built, env):
    """PT2_CUDNN_TIERED=0: the engine that compiles is made before the first call and, the
    better ranked of a tie, runs from the start; PT2_CUDNN_RUNTIME_COMPILE=0: never.  Neither has
    an upgrade thread."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="000", graph=True, prefetch=True,
                                env_extra=dict(env, FAKE_CUDNN="graph_rc", PROBE_WAIT="0"))
    assert results == [(0, 1)] * 3
    want = 7 if "PT2_CUDNN_TIERED" in env else 42
    assert engines(lines) == [want] * 3
    assert "upgrading 0" in lines and "upgrade" not in log
    assert len(starting(lines, "create")) == 3  # pt2's handle and two workers'


def test_prefetch_times_the_candidates_ahead(built):
    """With device memory for them, the prefetch times a new plan's candidates on scratch
    buffers of its operands' extents (x 2x4x9x9, w 6x4x3x3, y 2x6x9x9 f32; the workspace the
    largest candidate's), chooses its plan there and frees them; the calls then only run it.
    Without (the other tests), the first call times them."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="00", graph=True, prefetch=True,
                                env_extra={"FAKE_CUDNN": "graph_rc", "PT2_CUDNN_TIERED": "0", "PROBE_ALLOC": "1"})
    assert results == [(0, 1)] * 2
    at = lines.index("prefetched")
    assert sorted(int(l.split()[1]) for l in starting(lines[:at], "alloc")) == sorted([648 * 4, 216 * 4, 972 * 4, 2048])
    assert [l.split()[2] for l in starting(lines[:at], "graph_execute")] == ["0xa0000000"] * 2  # each candidate's warm-up run
    assert engines(lines) == [7, 7] and "timing the ranked plans" in log and "a plan chosen before" in log
    assert len(starting(lines[at:], "graph_execute")) == 2  # no timing at the calls


def test_tiers_untimed_takes_the_better_ranked(built):
    """PT2_CUDNN_BENCHMARK=0 (no timing): the first tier is the first ranked engine that does not
    compile, the upgrade the first ranked of all."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="00", graph=True,
                                env_extra={"FAKE_CUDNN": "graph_rc", "PROBE_WAIT": "0", "PT2_CUDNN_BENCHMARK": "0"})
    assert engines(lines) == [42, 7]
    assert "timing" not in log


def test_graph_plan_prefetch_then_tf32_switch(built):
    """A prefetched plan is for the TF32 flag of the load; a call under the other flag makes its
    own plan then, as without prefetching."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", tf32="01", graph=True, entries=2, prefetch=True)
    assert results == [(0, 1)] * 4
    assert len(starting(lines, "graph_tensor")) == 6
    made, destroyed = ([line.split()[1] for line in starting(lines, w)] for w in ("graph_create", "graph_destroy"))
    assert sorted(made) == sorted(destroyed)


@pytest.mark.parametrize("entry", ["conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled", "conv_bf16_s2x2_p1x1_d1x1_g2_bias_scaled"])
def test_scaled_weight_unfused_reads_the_unscaled_one(built, entry):
    """When the fused call is refused, the plain call convolves with the unscaled weight: the
    plan's epilogue kernel (done 1) applies the batch norm's scale and shift itself."""
    lines, results, log = probe(built, entry, tf32="000", fake="fused")
    assert results == [(0, 1)] * 3
    forwards = starting(lines, "forward")
    # without relu the fused call is not even tried (algorithm 6 is ranked first, IDENTITY needs 1)
    assert len(starting(lines, "fused")) == ("relu" in entry) and len(forwards) == 3
    assert all(" w 0x700000 " in f for f in forwards), forwards
    # the folds run only while the fused call may read them: at the first call with relu, never without
    assert folds_ran(lines) == ([1, 0, 0] if "relu" in entry else [0, 0, 0])


def test_f64(built):
    lines, results, _ = probe(built, "conv_f64_s1x1_p0x0_d1x1_g1")
    assert results == [(0, 1), (0, 1)]
    assert starting(lines, "conv") == [f"conv pad 0 0 stride 1 1 dilation 1 1 mode 1 compute {DOUBLE}"]
    assert starting(lines, "forward")[0].endswith("alpha 1 beta 0")  # read as doubles
    assert starting(lines, "math")[0] == f"math {DEFAULT_MATH}"


@pytest.mark.parametrize("fake,calls_forward", [("forward", 1), ("no_algo", 0), ("big_workspace", 0), ("set_stream", 0)])
def test_failures_leave_it_to_the_loops(built, fake, calls_forward):
    """cuDNN refusing the entry is never an error: done 0 (the plan runs the loops); a refused
    entry is not tried again."""
    lines, results, _ = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", fake=fake)
    assert results == [(0, 0), (0, 0)]
    assert len(starting(lines, "forward")) == calls_forward


def test_misaligned_view_runs_the_loops(built):
    """An input viewed 2 elements into its buffer (4 bytes in f16): algorithms are chosen without
    pointers and may assume 16-byte alignment, so that call runs the loops; an aligned one cuDNN."""
    _, results, _ = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1", x_offset=2)
    assert results == [(0, 0), (0, 0)]
    _, results, _ = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1", x_offset=8)
    assert results == [(0, 1), (0, 1)]


@pytest.mark.parametrize("library,fake", [("/nonexistent/libcudnn.so", ""), (None, "create")])
def test_no_cudnn(built, library, fake):
    lines, results, log = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1_bias_relu", library=library, fake=fake)
    assert results == [(0, 0), (0, 0)]
    assert not starting(lines, "forward") and not starting(lines, "fused")
    assert "convolutions run as loops" in log


@pytest.mark.parametrize("entry,n_operands", [("conv_f32_s1x1", None), ("conv_f32_s1x1_p1x1_d1x1_g1_gelu", None),
                                              ("conv_i32_s1x1_p1x1_d1x1_g1", None), ("conv_f32_s1x1_p1x1_d1x1_g1", 3),
                                              ("conv_f32_s1x1_p1x1_d1x1_g1_res", None), ("conv_f32_s1x1_p1x1_d1x1_g1_scaled", None),
                                              ("conv_f32_s1x1_p1x1_d1x1_g1_bias_scaled", 5)])
def test_malformed_entries_are_internal_errors(built, entry, n_operands):
    lines, results, _ = probe(built, entry, n_operands=n_operands)
    assert results and all(rc == -1 for rc, _ in results), lines
    assert any(line.startswith("error: internal: ") for line in lines)
    assert not starting(lines, "forward")


# ---- the graph API (the fake built with -DFAKE_GRAPH_API) and the fold launches


def test_graph_plan_plain_conv(built):
    """The graph API's plan runs the convolution: tensors x, w, y with their strides, the plan's
    workspace within the scratch, one cudnnBackendExecute a call; no legacy descriptors."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1", graph=True)
    assert results == [(0, 1), (0, 1)]
    assert starting(lines, "graph_tensor") == ["graph_tensor x dims 2 4 9 9 strides 324 81 9 1", "graph_tensor w dims 6 4 3 3 strides 36 9 3 1",
                                               "graph_tensor y dims 2 6 9 9 strides 486 81 9 1"]
    assert starting(lines, "graph_execute") == ["graph_execute x 0x100000 w 0x200000 y 0x300000 ws 0x600000"] * 2
    assert not starting(lines, "tensor") and not starting(lines, "get_algorithm") and not starting(lines, "forward")
    assert "graph API, engine 42, workspace 2048 of 33554432 bytes" in log


@pytest.mark.parametrize("entry", ["conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled", "conv_f16_s1x1_p1x1_d1x1_g1_bias_res_relu_scaled",
                                   "conv_bf16_s2x2_p1x1_d1x1_g2_bias_scaled"])
def test_graph_plan_skips_the_folds(built, entry):
    """A _scaled entry with a graph plan: the plan convolves with the unscaled weight (operand
    0x700000) and the epilogue kernel (done 1) applies the batch norm, so the fold launches (the
    scaled weight, the shift) would compute what nothing reads: the plan skips them."""
    lines, results, _ = probe(built, entry, tf32="000", graph=True)
    assert results == [(0, 1)] * 3 and folds_ran(lines) == [0, 0, 0]
    executes = starting(lines, "graph_execute")
    assert len(executes) == 3 and all(e.startswith("graph_execute x 0x100000 w 0x700000 y 0x300000 ") for e in executes), executes
    assert not starting(lines, "fused") and not starting(lines, "forward")


def test_graph_plan_skips_a_computed_bias(built):
    """An entry whose bias is computed in front of it (two biases summed; not scaled): with a
    graph plan that loop is skipped too, and the weight is w itself."""
    lines, results, _ = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1_bias_relu", graph=True, folds="1")
    assert results == [(0, 1), (0, 1)] and folds_ran(lines) == [0, 0]
    assert starting(lines, "graph_execute")[0].startswith("graph_execute x 0x100000 w 0x200000 y 0x300000 ")


@pytest.mark.parametrize("graph,api,fake", [(True, "legacy", ""), (True, None, "graph_none"), (False, None, "")])
def test_legacy_fused_call_runs_the_folds(built, graph, api, fake):
    """With the legacy API (PT2_CUDNN_API=legacy, no engine in the graph API's heuristics, no
    graph API at all) the fused call reads the scaled weight and the shift: the folds run."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled", graph=graph, api=api, fake=fake)
    assert results == [(0, 2), (0, 2)] and folds_ran(lines) == [1, 1]
    fused = starting(lines, "fused")
    assert len(fused) == 2 and all(f.startswith("fused algo 1 x 0x100000 w 0x200000 z 0x300000 bias 0x400000 ") for f in fused), fused
    assert not starting(lines, "graph_execute")
    if fake == "graph_none":
        assert "no engine of cuDNN's heuristics finalizes and fits" in log


def test_graph_plan_failing_at_run_time(built):
    """The graph plan fails at the first call, after the plan skipped the folds: that call falls
    back to the legacy API but must not take the fused call (the scaled weight and the shift
    were not computed): the unfused call on the unscaled weight, the epilogue kernel (done 1).
    From the next call on, the folds run and the fused call reads them (done 2)."""
    lines, results, log = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled", tf32="000", graph=True, fake="graph_run")
    assert results == [(0, 1), (0, 2), (0, 2)] and folds_ran(lines) == [0, 1, 1]
    events = [line.split()[0] for line in lines if line.split()[0] in ("fold", "call", "graph_execute", "fused", "forward")]
    assert events == ["fold", "graph_execute", "forward", "call", "fold", "fused", "call", "fold", "fused", "call"], events
    assert " w 0x700000 " in starting(lines, "forward")[0]
    assert all(" w 0x200000 " in f for f in starting(lines, "fused"))
    assert "the graph API's plan failed (FAKE_FAILURE)" in log and "the folded operands were not computed for this call" in log


@pytest.mark.parametrize("graph", [False, True])
def test_folds_skipped_where_the_loops_run(built, graph):
    """No cuDNN, a misaligned operand: the loops compute the conv from the unscaled weight and
    the kept epilogue applies the batch norm: the folds are skipped (they read nothing of them)."""
    lines, results, log = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1_bias_relu_scaled", library="/nonexistent/libcudnn.so")
    assert results == [(0, 0), (0, 0)] and folds_ran(lines) == [0, 0]
    lines, results, _ = probe(built, "conv_f16_s1x1_p1x1_d1x1_g1_bias_relu_scaled", x_offset=2, graph=graph)
    assert results == [(0, 0), (0, 0)] and folds_ran(lines) == [0, 0]
    assert not starting(lines, "graph_execute") and not starting(lines, "fused") and not starting(lines, "forward")


def test_tf32_switch_is_decided_before_the_folds(built):
    """The TF32 flag changed between calls: the entry is made again when the plan asks about its
    folds (before them), and the call uses what was decided there."""
    lines, results, _ = probe(built, "conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled", tf32="01")
    assert results == [(0, 2), (0, 2)] and folds_ran(lines) == [1, 1]
    second_algorithm = [i for i, line in enumerate(lines) if line.startswith("get_algorithm")][1]
    assert second_algorithm < lines.index("fold 1 rc 0 ran 1"), lines
