"""The frame hook (capture/hook.c) through _pt2_frame_test: installing and
chaining it, other threads, the co_extra cache of guarded entries and the
recompile limit, compile errors falling back to eager, and the skip rules.
Helpers and fixtures: frame_helpers.py."""
import collections
import gc
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import traceback
import warnings
import weakref

import pytest

from frame_helpers import HERE, REPO, T, Tensorish, clean_state, compiler_for, fresh, line_of, mode  # noqa: F401


# ---------------------------------------------------------------------------
# installing, chaining, threads
# ---------------------------------------------------------------------------
def test_installed_only_inside_run():
    seen = []
    T.run_with_compiler(None, lambda: seen.append((T.eval_frame_is_default(), T.stats()["installed"])))
    assert seen == [(False, True)]
    st = T.stats()
    assert (st["installs"], st["uninstalls"], st["active_runs"], st["installed"]) == (1, 1, 0, False)


def test_nested_runs_and_exceptions_restore_state():
    states = []

    def inner():
        states.append(T.stats()["active_runs"])
        raise KeyError("inner")

    def outer():
        states.append(T.stats()["active_runs"])
        with pytest.raises(KeyError):
            T.run_with_compiler(None, inner)
        states.append(T.stats()["active_runs"])
        return 7

    assert T.run_with_compiler(None, outer) == 7
    assert states == [1, 2, 1]
    assert T.stats()["installs"] == 1  # the nested run did not reinstall
    with pytest.raises(ZeroDivisionError):
        T.run_with_compiler(None, lambda: 1 / 0)
    assert T.stats()["active_runs"] == 0


def test_nested_runs_use_their_own_compiler():
    def f(x):
        return x
    f = fresh(f)
    outer_log, inner_log = [], []
    inner = compiler_for({}, inner_log)
    T.run_with_compiler(compiler_for({}, outer_log), lambda: T.run_with_compiler(inner, f, 1))
    assert [n for n, _ in outer_log] == ["<lambda>"]
    assert [n for n, _ in inner_log] == ["f"]


def test_chain_to_hook_installed_before():
    def f(a, b):
        return a + b
    f = fresh(f)
    table = {f.__code__: ((int, int), T.make_call_replacement(f.__code__, lambda a, b: a * b))}

    def plain(x):
        return x

    def body():
        return [f(3, 4), plain(1), plain(2)]

    T.other_hook_install()
    try:
        c0 = T.other_hook_count()
        assert T.run_with_compiler(compiler_for(table), body) == [12, 1, 2]
        # body, f, plain, plain (and the replacement lambda) reached it through our chain
        assert T.other_hook_count() - c0 >= 4
        assert T.other_hook_is_top()
    finally:
        T.other_hook_uninstall()


def test_chain_under_hook_installed_on_top():
    def plain(x):
        return x

    def body():
        T.other_hook_install()  # on top of ours, chaining to ours
        c0 = T.other_hook_count()
        plain(1)
        return T.other_hook_count() - c0

    assert T.run_with_compiler(None, body) >= 1
    st = T.stats()
    assert st["uninstall_conflicts"] == 1  # removing ourselves would cut its chain
    assert T.other_hook_is_top()
    T.other_hook_uninstall()
    assert T.stats()["installed"]  # ours, now a pass-through
    T.run_with_compiler(None, plain, 1)  # the next run removes it
    assert not T.stats()["installed"] and T.eval_frame_is_default()


def test_settrace_sees_replacement_frames(mode):
    def f(a):
        return a + 1
    f = fresh(f)
    table = {f.__code__: ((int,), T.make_call_replacement(f.__code__, lambda a: a * 10))}
    events = []

    def tracer(frame, event, arg):
        if event in ("call", "return") and frame.f_code.co_filename == __file__:
            events.append((event, frame.f_code.co_name))
        return tracer

    sys.settrace(tracer)
    try:
        r = T.run_with_compiler(compiler_for(table), f, 4)
    finally:
        sys.settrace(None)
    assert r == 40
    assert ("call", "f") in events and ("return", "f") in events
    assert ("call", "<lambda>") in events


def test_other_threads_unaffected():
    def g(x):
        return x + 1
    g = fresh(g)
    table = {g.__code__: ((int,), T.make_call_replacement(g.__code__, lambda x: ("R", x)))}
    in_scope, stop = threading.Event(), threading.Event()
    b_results, b_log = [], []

    def thread_b():
        # its own run with a compiler that records: must see only its frames
        while not stop.is_set():
            r = g(1)
            if in_scope.is_set():
                b_results.append(r)
            time.sleep(0)

    tb = threading.Thread(target=thread_b)
    tb.start()
    a_results = []

    def scope():
        in_scope.set()
        t_end = time.time() + 0.3
        while time.time() < t_end and len(b_results) < 200:
            a_results.append(g(1))
            time.sleep(0.0005)
        in_scope.clear()

    try:
        T.run_with_compiler(compiler_for(table, b_log), scope)
    finally:
        stop.set()
        tb.join()
    assert a_results and all(r == ("R", 1) for r in a_results)
    assert len(b_results) > 10 and all(r == 2 for r in b_results)
    assert {n for n, _ in b_log} <= {"scope", "<lambda>", "g"}  # never thread B's thread_b
    assert g(1) == 2


def test_run_disabled():
    def g(x):
        return x + 1
    g = fresh(g)
    table = {g.__code__: ((int,), T.make_call_replacement(g.__code__, lambda x: -x))}
    assert T.run_with_compiler(compiler_for(table), lambda: (g(5), T.run_disabled(g, 5))) == (-5, 6)


@pytest.mark.skipif(sys.version_info < (3, 11, 4), reason="gh-104405: specialized __getitem__ bypasses the hook")
def test_specialized_call_sites_still_intercepted():
    seen = collections.Counter()

    def compiler(code, f_locals, func):
        seen[code.co_name] += 1
        return None

    def plain(x):
        return x

    class C:
        @property
        def prop(self):
            return 1

        def __getitem__(self, i):
            return i

        def meth(self):
            return 2

    def driver():
        c, s = C(), 0
        for i in range(20):
            s += plain(i) + c.prop + c[i] + c.meth()
        return s

    for _ in range(100):  # let the adaptive interpreter specialize every site
        driver()
    assert T.run_with_compiler(compiler, driver) == driver()
    assert dict(seen) == {"driver": 1, "plain": 20, "prop": 20, "__getitem__": 20, "meth": 20}


# ---------------------------------------------------------------------------
# the cache
# ---------------------------------------------------------------------------
def test_cache_entries_and_move_to_front():
    def f(a):
        return "orig"
    f = fresh(f)
    co = f.__code__
    reps = {t: T.make_call_replacement(co, (lambda t: lambda a: t.__name__)(t)) for t in (int, float, str)}
    pending = [int, float, str]

    def compiler(code, f_locals, func):
        if code is co and pending:
            t = pending.pop(0)
            return ((t,), reps[t])
        return None

    assert T.run_with_compiler(compiler, lambda: [f(1), f(1.0), f("s")]) == ["int", "float", "str"]
    assert T.cache_size(co) == 3
    # chain is now str, float, int (newest first): an int call tries 3 guards
    c0 = T.guard_checks()
    assert T.run_with_compiler(None, f, 2) == "int"
    assert T.guard_checks() - c0 == 3
    # the hit moved int to the front: one guard now
    c0 = T.guard_checks()
    assert T.run_with_compiler(None, f, 3) == "int"
    assert T.guard_checks() - c0 == 1
    assert T.run_with_compiler(None, f, b"x") == "orig"  # bytes: no entry, no compiler
    T.reset()
    assert T.cache_size(co) == 0
    assert T.run_with_compiler(None, f, 2) == "orig"


def test_compiler_sees_locals_with_cells_and_freevars():
    log = []

    def outer():
        k = 10

        def f(x, y=5):
            def g():
                return x + k
            return g() + y
        return f

    f = outer()
    assert T.run_with_compiler(compiler_for({}, log), f, 1) == 16
    assert log[0] == ("f", {"x": 1, "y": 5, "k": 10})


def test_skip_code_outcome_and_reset():
    def f(a):
        return a
    f = fresh(f)
    log = []

    def compiler(code, f_locals, func):
        log.append(code.co_name)
        return False if code is f.__code__ else None

    T.run_with_compiler(compiler, lambda: [f(1), f(2)])
    assert log.count("f") == 1
    assert T.is_skipped(f.__code__)
    T.reset()  # forgets the compiler's SKIP
    assert not T.is_skipped(f.__code__)
    T.run_with_compiler(compiler, f, 3)
    assert log.count("f") == 2


def test_cache_freed_with_code_object():
    ns = {}
    exec("def h(a):\n    return a\n", ns)
    h = ns.pop("h")
    rep = T.make_call_replacement(h.__code__, lambda a: -a)
    assert T.run_with_compiler(compiler_for({h.__code__: ((int,), rep)}), h, 4) == -4
    wr = weakref.ref(rep)
    del rep
    gc.collect()
    assert wr() is not None  # the cache entry holds it
    del h, ns
    gc.collect()
    assert wr() is None


def test_recompile_limit_single_warning():
    def f(a):
        return ("orig", type(a).__name__)
    f = fresh(f)
    co = f.__code__

    compiled_for = []

    def compiler(code, f_locals, func):
        if code is co:
            compiled_for.append(type(f_locals["a"]))
            return ((type(f_locals["a"]),), T.make_call_replacement(co, lambda a: ("compiled", type(a).__name__)))
        return None

    T.set_recompile_limit(3)
    args = [1, 1.0, "s", b"b", (), 2, "t", None, []]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = T.run_with_compiler(compiler, lambda: [f(a) for a in args])
    assert out == [("compiled", "int"), ("compiled", "float"), ("compiled", "str"),
                   ("orig", "bytes"), ("orig", "tuple"), ("compiled", "int"), ("compiled", "str"),
                   ("orig", "NoneType"), ("orig", "list")]
    limit = [x for x in w if "recompile limit" in str(x.message)]
    assert len(limit) == 1
    msg = str(limit[0].message)
    assert issubclass(limit[0].category, RuntimeWarning)
    assert co.co_qualname in msg and "%s:%d" % (co.co_filename, co.co_firstlineno) in msg
    # the most recently added entry (str) failed on bytes
    assert "type(a) is str (got bytes)" in msg
    assert T.cache_size(co) == 3 and compiled_for == [int, float, str]
    T.reset()  # a reset starts counting again
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert T.run_with_compiler(compiler, f, b"x") == ("compiled", "bytes")
    assert not w


def test_recompile_limit_from_environment():
    src = textwrap.dedent("""
        import sys, warnings
        sys.path[:0] = %r
        import _pt2_frame_test as T
        def f(a):
            return a
        co = f.__code__
        def compiler(code, f_locals, func):
            if code is co:
                return ((type(f_locals["a"]),), T.make_call_replacement(co, lambda a: a))
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            T.run_with_compiler(compiler, lambda: [f(1), f(1.0), f("s")])
        print(T.cache_size(co), len(w))
    """) % (sys.path,)
    env = dict(os.environ, PT2_RECOMPILE_LIMIT="1")
    p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "1"]


def test_compile_error_falls_back_with_one_warning():
    def f(a, b):
        return a - b
    f = fresh(f)

    def compiler(code, f_locals, func):
        if code is f.__code__:
            raise ValueError("cannot trace this")
        return None

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert T.run_with_compiler(compiler, lambda: [f(5, 3), f(7, 1)]) == [2, 6]
    assert len(w) == 1
    co = f.__code__
    assert str(w[0].message) == "pt2: falling back to eager for %s (%s:%d): cannot trace this" % (
        co.co_qualname, co.co_filename, co.co_firstlineno)
    assert T.stats()["compile_errors"] == 1


def test_compile_error_as_exception_when_warnings_are_errors():
    def f(a):
        return a
    f = fresh(f)
    obj = Tensorish(1)

    def compiler(code, f_locals, func):
        if code is f.__code__:
            raise ValueError("nope")
        return None

    rc = sys.getrefcount(obj)
    d0 = T.datastack_info()
    for _ in range(20):
        T.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(RuntimeWarning, match="falling back to eager"):
                T.run_with_compiler(compiler, f, obj)
    assert sys.getrefcount(obj) == rc
    assert T.datastack_info() == d0


def test_unusable_compiler_results_fall_back():
    def f(a, b):
        return a + b
    f = fresh(f)

    def other(p):  # one argument slot: cannot run in f's frame
        return p

    for bad in ("not code", other.__code__):
        T.reset()
        table = {f.__code__: ((int, int), bad)}
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert T.run_with_compiler(compiler_for(table), f, 1, 2) == 3
        assert len(w) == 1 and "falling back to eager" in str(w[0].message)


def test_user_exception_from_original_propagates_unchanged():
    def boom(a):
        x = a + 1
        raise KeyError(x)  # BOOM_LINE
    boom = fresh(boom)
    err = KeyError("orig")

    def compiler(code, f_locals, func):
        return None

    with pytest.raises(KeyError) as info:
        T.run_with_compiler(compiler, boom, 1)
    assert info.value.args == (2,)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.name, last.lineno) == ("boom", line_of(boom, "BOOM_LINE"))
    assert err.args == ("orig",)


# ---------------------------------------------------------------------------
# skip rules
# ---------------------------------------------------------------------------
def _stdlib_dirs():
    paths = sysconfig.get_paths()
    site = [paths["purelib"], paths["platlib"]]
    return [paths["stdlib"], paths["platstdlib"]], site


def test_stdlib_frames_never_reach_the_compiler():
    files = []

    def compiler(code, f_locals, func):
        files.append(code.co_filename)
        return None

    def body():
        s = json.dumps({"a": [1, 2, 3]})
        d = textwrap.dedent("  x\n  y\n")
        c = collections.Counter("abracadabra")
        p = os.path.join("a", "b")  # frozen module on 3.11+
        return len(s) + len(d) + len(c) + len(p)

    assert T.run_with_compiler(compiler, body) == body()
    assert files == [__file__]
    for path in (json.dumps, textwrap.dedent, collections.Counter.__init__, os.path.join):
        assert T.is_skipped(path.__code__)


def test_skip_rules_by_filename():
    stdlib, site = _stdlib_dirs()

    def code_at(filename):
        return compile("def g():\n    return 1\n", filename, "exec").co_consts[0]

    assert T.is_skipped(code_at(os.path.join(stdlib[0], "fake_stdlib_module.py")))
    assert T.is_skipped(code_at("<frozen fake>"))
    assert T.is_skipped(code_at(os.path.join(REPO, "python", "pt2", "fake_pt2_module.py")))
    assert not T.is_skipped(code_at(os.path.join(site[0], "somepkg", "mod.py")))  # third party
    assert not T.is_skipped(code_at(os.path.join(HERE, "user_code.py")))
    assert not T.is_skipped(code_at("<string>"))
    spec = importlib.util.find_spec("torch")  # locates torch without importing it
    if spec is not None:
        torch_dir = spec.submodule_search_locations[0]
        assert T.is_skipped(code_at(os.path.join(torch_dir, "nn", "fake.py")))


def test_generators_coroutines_module_and_class_bodies_skipped():
    def gen(x):
        yield x
        yield x + 1

    async def coro(x):
        return x * 2

    async def agen(x):
        yield x

    log = []

    def body():
        g = gen(1)
        out = [next(g)]
        with pytest.raises(ValueError):
            g.throw(ValueError("t"))  # resumes the frame with throwflag set
        c = coro(5)
        try:
            c.send(None)
        except StopIteration as e:
            out.append(e.value)
        a = agen(3).__anext__()
        try:
            a.send(None)
        except StopIteration as e:
            out.append(e.value)
        ns = {}
        exec(compile("class K:\n    x = 1\nv = K.x + 1\n", "<test-module>", "exec"), ns)
        out.append(ns["v"])
        return out

    assert T.run_with_compiler(compiler_for({}, log), body) == [1, 10, 3, 2]
    names = {n for n, _ in log}
    assert not names & {"gen", "coro", "agen", "<module>", "K"}
    assert all(T.is_skipped(c) for c in (gen.__code__, coro.__code__, agen.__code__))
