"""torch's global-state queries answered at trace time (capture/queries.c,
docs/capture.md "Global-state queries"): each compared with eager, counted
with pt2.explain (one graph, no break), and, for the guarded ones, a change
between calls must recompile and give eager's answer, never the stale one.

This machine's torch is a CPU build, where torch.cuda's C functions are
stand-in classes that raise: the CUDA build's C function
torch._C._cuda_isCurrentStreamCapturing is played by a function put in its
place (in torch._C and in torch.cuda.graphs, which imported it), returning a
flag the test flips.  tests/gpu/test_gpu_capture.py checks the real one
inside torch.cuda.graph capture."""
import pytest
import torch

import pt2
from pt2 import _C
from test_capture import compare, r
from test_capture_objects import check, counts, run_both


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def guards_of(fn, *args):
    with torch.no_grad():
        return pt2.explain(fn)(*args).out_guards


def query_guards(fn, *args):
    """The QUERY guards of fn's entries, less the autocast one every entry has."""
    return [g for g in guards_of(fn, *args) if g.startswith("QUERY") and "_is_any_autocast_enabled" not in g]


# ---------------------------------------------------------------- every query: eager's answer, one graph


def q_grad(x):
    return x + 1, torch.is_grad_enabled()


def q_scripting(x):
    return x + 1, torch.jit.is_scripting(), torch.compiler.is_exporting()


def q_tracing(x):
    return x + 1, torch.jit.is_tracing(), torch._C._get_tracing_state()


def q_cuda_constants(x):
    return x + 1, torch.cuda.is_available(), torch.cuda.device_count(), torch.backends.mps.is_available()


def q_initialized(x):
    return x + 1, torch.cuda.is_initialized()


def q_default_dtype(x):
    return x.to(torch.get_default_dtype()) + 1


def q_autocast(x):
    return x + 1, torch.is_autocast_enabled(), torch.is_autocast_enabled("cpu")


def q_deterministic(x):
    return x + 1, torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


def q_backend_flags(x):
    b = torch.backends
    return x + 1, b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic


def q_matmul_precision(x):
    return x + 1, torch.get_float32_matmul_precision()


QUERIES = [q_grad, q_scripting, q_tracing, q_cuda_constants, q_initialized, q_default_dtype, q_autocast,
           q_deterministic, q_backend_flags, q_matmul_precision]


@pytest.mark.parametrize("fn", QUERIES, ids=lambda f: f.__name__)
def test_query_is_eager_answer_in_one_graph(fn):
    check(fn, lambda: (r(3, 5),))


def test_query_answers_under_enable_grad():
    """is_grad_enabled is the trace's own mode (a GRAD_MODE guard), not a QUERY."""
    pt2.reset()
    f = pt2.compile(q_grad)
    x = r(3)
    for mode in (False, True, False):
        with torch.set_grad_enabled(mode):
            assert f(x)[1] is mode


# ---------------------------------------------------------------- is_compiling: True, as under torch.compile


def q_compiling(x):
    return (x + 1, torch.compiler.is_compiling(), torch.compiler.is_dynamo_compiling(), torch._dynamo.is_compiling(),
            torch._utils.is_compiling(), torch.jit.is_scripting(), torch.compiler.is_exporting())


def branch_on_compiling(x):
    y = x * 3
    if torch.compiler.is_compiling():
        return y - 1
    return y + 1


def ask_compiling():
    """No tensor op: the frame is left to CPython, which calls the real function."""
    return torch.compiler.is_compiling()


def test_is_compiling_is_true_in_the_trace():
    """torch.compile documents is_compiling() (and its aliases) as True
    while compiling; is_scripting/is_exporting stay False.  The oracle is
    that documentation, written out: eager answers False for all six."""
    import torch._dynamo  # noqa: F401  (torch._dynamo.is_compiling: a row once imported)

    f = pt2.compile(q_compiling)
    for shape in ((3, 5), (7,), (2, 1, 4)):
        x = r(*shape)
        with torch.no_grad():
            for _ in range(2):  # capture, then the cache-hit path
                out = f(x)
                compare(out[0], x + 1, 1e-6)
                assert out[1:] == (True, True, True, True, False, False)
    with torch.no_grad(), pytest.warns(UserWarning, match="is_compiling"):  # torch._utils' deprecation
        assert q_compiling(r(3))[1:] == (False,) * 6
    assert counts(q_compiling, r(3))[:2] == (1, 0)


def test_branch_on_is_compiling_takes_the_compile_path():
    """Inside pt2.compile the branch takes the compiled path (x * 3 - 1, what
    torch.compile gives); outside, the eager one (x * 3 + 1).  Nothing is
    guarded for the answer: no QUERY guard, one entry reused."""
    f = pt2.compile(branch_on_compiling)
    x = r(4, 3)[:, 1]  # non-contiguous
    with torch.no_grad():
        for _ in range(3):
            compare(f(x), x * 3 - 1, 1e-6)
            compare(branch_on_compiling(x), x * 3 + 1, 1e-6)
        assert _C.cache_size(branch_on_compiling.__code__) == 1
        assert counts(branch_on_compiling, x)[:2] == (1, 0)
    assert query_guards(branch_on_compiling, x) == []
    assert not any("is_compiling()" in g for g in guards_of(branch_on_compiling, x)), guards_of(branch_on_compiling, x)


def test_is_compiling_in_a_frame_left_to_cpython_is_false():
    """A frame without tensor ops runs eagerly (as Dynamo runs a frame that
    gives no graph): it calls the real function, False."""
    assert pt2.compile(ask_compiling)() is False


def test_is_compiling_with_arguments_is_not_answered():
    """is_compiling takes no arguments: called with one, it is traced as any
    call and raises eager's TypeError, never answered True."""
    def bad(x):
        return x + 1, torch.compiler.is_compiling(1)

    with pytest.raises(TypeError):
        bad(r(3))
    with pytest.raises(TypeError):
        pt2.compile(bad)(r(3))


def test_process_constants_have_no_guard():
    assert query_guards(q_cuda_constants, r(3)) == []
    assert query_guards(q_scripting, r(3)) == []
    assert query_guards(q_compiling, r(3)) == []


def test_guarded_queries_name_their_probe():
    g = query_guards(q_backend_flags, r(3))
    for probe in ("_get_cublas_allow_tf32", "_get_cudnn_allow_tf32", "_get_cudnn_enabled", "_get_cudnn_benchmark",
                  "_get_cudnn_deterministic"):
        assert any(probe in t for t in g), g
    g = query_guards(q_autocast, r(3))
    assert any("is_autocast_enabled() == False" in t for t in g), g
    assert any("is_autocast_enabled('cpu') == False" in t for t in g), g
    assert any("_is_tracing() == False" in t for t in query_guards(q_tracing, r(3)))
    assert any("_get_tracing_state() == None" in t for t in query_guards(q_tracing, r(3)))


def test_every_entry_is_guarded_against_autocast():
    assert any("QUERY torch._C._is_any_autocast_enabled() == False" in t for t in guards_of(lambda x: x + 1, r(3)))


# ---------------------------------------------------------------- a flag changed between calls recompiles


def branch_on_tf32(x):
    if torch.backends.cuda.matmul.allow_tf32:
        return x * 2
    return x + 1


def branch_on_cudnn_tf32(x):
    if torch.backends.cudnn.allow_tf32:
        return x * 2
    return x + 1


def branch_on_deterministic(x):
    if torch.are_deterministic_algorithms_enabled():
        return x * 2
    return x + 1


def _flip(get, set_):
    old = get()
    return old, lambda v: set_(v)


@pytest.mark.parametrize(
    "fn,get,set_",
    [
        (branch_on_tf32, lambda: torch.backends.cuda.matmul.allow_tf32,
         lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v)),
        (branch_on_cudnn_tf32, lambda: torch.backends.cudnn.allow_tf32,
         lambda v: setattr(torch.backends.cudnn, "allow_tf32", v)),
        (branch_on_deterministic, torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
    ],
    ids=["matmul.allow_tf32", "cudnn.allow_tf32", "deterministic"],
)
def test_flag_flip_recompiles(fn, get, set_):
    old = get()
    f = pt2.compile(fn)
    x = r(4, 3)
    try:
        for v in (old, not old, old, not old):
            set_(v)
            with torch.no_grad():
                compare(f(x), fn(x), 1e-6)
        assert _C.cache_size(fn.__code__) == 2  # one entry per value, both reused
    finally:
        set_(old)
    with torch.no_grad():
        assert counts(fn, x)[:2] == (1, 0)


# ---------------------------------------------------------------- CUDA stream capture, played on a CPU build


class Capturing:
    """Stands for torch._C._cuda_isCurrentStreamCapturing of a CUDA build
    (put where torch.cuda.is_current_stream_capturing finds it).  `on` sets
    what it answers (a truth value: 1/0 from the C-level probe)."""

    def __init__(self, monkeypatch, c_level):
        self.items = []
        if c_level:  # a C callable, as the real one: no Python frame in the guard
            fn = self.items.__len__
        else:

            def fn():
                return bool(self.items)

        monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", fn, raising=False)
        monkeypatch.setattr(torch.cuda.graphs, "_cuda_isCurrentStreamCapturing", fn)

    def set(self, on):
        self.items[:] = [1] if on else []


def branch_on_capture(x):
    y = x * 3
    if torch.cuda.is_current_stream_capturing():
        return y - 1
    return y + 1


def hf_is_tracing(x):
    """transformers.utils.import_utils.is_tracing's shape: the probe inside
    try/except, the answer or-ed with other flags (not is_compiling, True
    in every trace, which would hide the probe's answer)."""
    try:
        capturing = torch.cuda.is_current_stream_capturing()
    except Exception:
        capturing = False
    if torch.jit.is_tracing() or capturing:
        return x.relu()
    return x.sigmoid()


def hf_is_tracing_compiling(x):
    """is_tracing as transformers writes it, is_compiling or-ed in."""
    try:
        capturing = torch.cuda.is_current_stream_capturing()
    except Exception:
        capturing = False
    if torch.jit.is_tracing() or torch.compiler.is_compiling() or capturing:
        return x.relu()
    return x.sigmoid()


def direct_c_function(x):
    if torch._C._cuda_isCurrentStreamCapturing():
        return x - 1
    return x + 1


@pytest.mark.parametrize("c_level", [True, False], ids=["c-probe", "python-probe"])
@pytest.mark.parametrize("fn", [branch_on_capture, hf_is_tracing, direct_c_function], ids=lambda f: f.__name__)
def test_stream_capture_flip_recompiles(monkeypatch, fn, c_level):
    cap = Capturing(monkeypatch, c_level)
    x = r(5, 3)
    with torch.no_grad():
        g, b, reasons = counts(fn, x)
        assert (g, b) == (1, 0), reasons
        assert any("QUERY" in t and t.endswith(("== False", "== 0")) for t in query_guards(fn, x)), guards_of(fn, x)
    pt2.reset()
    f = pt2.compile(fn)
    with torch.no_grad():
        for v in (False, True, True, False, True):
            cap.set(v)
            compare(f(x), fn(x), 1e-6)
    assert _C.cache_size(fn.__code__) == 2


@pytest.mark.parametrize("c_level", [True, False], ids=["c-probe", "python-probe"])
def test_stream_capture_or_compiling_is_the_compile_path(monkeypatch, c_level):
    """With is_compiling() or-ed in, pt2 takes the relu path whatever the
    capture flag says (torch.compile does); eager, the sigmoid one while
    not capturing."""
    cap = Capturing(monkeypatch, c_level)
    f = pt2.compile(hf_is_tracing_compiling)
    x = r(5, 3)
    with torch.no_grad():
        for v in (False, True, False):
            cap.set(v)
            compare(f(x), x.relu(), 1e-6)
            compare(hf_is_tracing_compiling(x), x.relu() if v else x.sigmoid(), 1e-6)
        assert counts(hf_is_tracing_compiling, x)[:2] == (1, 0)


def test_python_wrapper_replaced(monkeypatch):
    """torch.cuda.is_current_stream_capturing itself replaced by a Python
    function: inlined (what it reads is guarded), a flip recompiles."""
    state = {"on": False}
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: state["on"])
    f = pt2.compile(branch_on_capture)
    x = r(4)
    with torch.no_grad():
        for v in (False, True, False):
            state["on"] = v
            compare(f(x), branch_on_capture(x), 1e-6)
        assert counts(branch_on_capture, x)[:2] == (1, 0)


def test_stream_capture_query_raising_is_still_traced(monkeypatch):
    """A query that raises at trace time (the CPU build's stand-in does) is
    traced as any call: the except clause takes it, as in eager."""
    def raising():
        raise RuntimeError("no CUDA")

    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", raising, raising=False)
    monkeypatch.setattr(torch.cuda.graphs, "_cuda_isCurrentStreamCapturing", raising)
    check(hf_is_tracing, lambda: (r(3, 4),))


def test_recompile_limit_runs_eagerly_with_the_right_answer(monkeypatch):
    cap = Capturing(monkeypatch, True)
    _C.set_recompile_limit(1)
    try:
        f = pt2.compile(branch_on_capture)
        x = r(3)
        with torch.no_grad(), pytest.warns(RuntimeWarning):
            for v in (False, True, False, True):
                cap.set(v)
                compare(f(x), branch_on_capture(x), 1e-6)
    finally:
        _C.set_recompile_limit(8)


def test_stream_capture_stub_of_cpu_build_unchanged():
    """Without a patch, the CPU build's stand-in class raises: not a query."""
    check(hf_is_tracing, lambda: (r(2, 3),))
    assert not any("StreamCapturing" in q for q in query_guards(hf_is_tracing, r(2, 3)))


# ---------------------------------------------------------------- autocast: graphs do not follow it


def matmul(x, w):
    return x @ w


def outer_with_autocast(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return matmul(x, w)


def test_autocast_region_runs_eagerly():
    f = pt2.compile(matmul)
    x, w = r(4, 8), r(8, 3)
    with torch.no_grad():
        compare(f(x, w), matmul(x, w), 1e-6)
        with torch.autocast("cpu", dtype=torch.bfloat16), pytest.warns(RuntimeWarning, match="autocast"):
            out = f(x, w)
        ref = torch.autocast("cpu", dtype=torch.bfloat16)(matmul)(x, w)
        assert out.dtype == ref.dtype == torch.bfloat16
        compare(out, ref, 1e-6)


def test_frame_compiled_outside_autocast_not_reused_inside():
    """matmul's entry (compiled by a plain call) must not run inside the
    autocast region that outer_with_autocast opens after its break."""
    f = pt2.compile(matmul)
    g = pt2.compile(outer_with_autocast)
    x, w = r(4, 8), r(8, 3)
    with torch.no_grad():
        f(x, w)
        for _ in range(2):
            out, ref = g(x, w), outer_with_autocast(x, w)
            assert out.dtype == ref.dtype == torch.bfloat16
            compare(out, ref, 1e-6)


# ---------------------------------------------------------------- descriptors with a Python __get__


class Flag:
    """A data descriptor whose __get__ asks a C function (torch.backends'
    ContextProp)."""

    def __init__(self, getter):
        self.getter = getter

    def __get__(self, obj, objtype):
        return self.getter()

    def __set__(self, obj, v):
        raise AttributeError("read-only")


class Holder:
    grad = Flag(torch.is_grad_enabled)
    tf32 = Flag(torch._C._get_cublas_allow_tf32)

    def __eq__(self, other):
        return type(other) is Holder


def read_descriptors(x, h):
    return x + 1, h.grad, h.tf32


def test_data_descriptor_get_is_inlined():
    check(read_descriptors, lambda: (r(3), Holder()))


# ---------------------------------------------------------------- transformers, as on a CUDA build


@pytest.mark.parametrize("arch", ["BertForMaskedLM", "DistilBertForMaskedLM"])
def test_hf_model_with_cuda_build_probe_is_one_graph(monkeypatch, arch):
    """transformers asks torch.cuda.is_current_stream_capturing() in its
    wrappers; with the CUDA build's C probe (played here, answering False)
    the model stays one graph and matches eager.  (Where transformers asks it
    in a helper without tensor ops, that frame is left to CPython, which
    calls the probe itself.)"""
    transformers = pytest.importorskip("transformers")
    Capturing(monkeypatch, True)
    if arch == "BertForMaskedLM":
        cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=37, max_position_embeddings=64)
    else:
        cfg = transformers.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
                                            max_position_embeddings=64)
    torch.manual_seed(0)
    m = getattr(transformers, arch)(cfg).eval()
    ids = torch.randint(0, 100, (2, 13))
    with torch.no_grad():
        e = pt2.explain(m)(ids)
        assert (e.graph_count, e.graph_break_count) == (1, 0), str(e)
        cm = pt2.compile(m)
        for _ in range(2):
            compare(cm(ids).logits, m(ids).logits, 1e-4)
