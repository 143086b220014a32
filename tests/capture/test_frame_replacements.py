"""Replacement code running in place of a frame (capture/hook.c), in swap
mode and in call mode: argument kinds, cells and free variables, frames
grown for extra locals, recursion, tracebacks, reference counts, and a
graph break end to end.  Helpers and fixtures: frame_helpers.py."""
import dis
import sys
import traceback
import types

import pytest

from frame_helpers import (SINK, T, Tensorish, binop_arg, clean_state, compare_arg, compiler_for,  # noqa: F401
                           fresh, mode, offset_after_call_to, paper_f)


# ---------------------------------------------------------------------------
# running replacements
# ---------------------------------------------------------------------------
def test_kwargs_defaults_varargs(mode):
    def f(a, b=2, *args, c, d=4, **kw):
        return "orig"
    f = fresh(f)
    table = {f.__code__: ((int,), T.make_call_replacement(f.__code__, lambda *slots: slots))}

    def body():
        return f(1, c=3, e=5), f(1, 9, 8, 7, c=3, d=0)

    assert T.run_with_compiler(compiler_for(table), body) == (
        (1, 2, 3, 4, (), {"e": 5}), (1, 9, 3, 0, (8, 7), {}))
    st = T.stats()
    assert (st["swaps"], st["calls"]) == ((2, 0) if mode == "swap" else (0, 2))


def test_cells_and_freevars(mode):
    def outer():
        k = 10

        def f(x):
            g = lambda: x + k  # noqa: E731  x: a cell argument, k: a free variable
            return g()
        return f

    f = outer()
    co = f.__code__
    assert (co.co_cellvars, co.co_freevars) == (("x",), ("k",))
    # return x * k * 2 through the assembler, with a new local appended
    # (CPython moves the cell-only and free slots after it)
    rep = T.assemble(co, [("line", co.co_firstlineno), ("prologue",),
                          ("op", "LOAD_DEREF", ("local", "x")), ("op", "LOAD_DEREF", ("local", "k")),
                          ("op", "BINARY_OP", binop_arg("*")), ("store_fast", "tmp"),
                          ("load_fast", "tmp"), ("load_const", 2), ("op", "BINARY_OP", binop_arg("*")),
                          ("return_value",)])
    assert "tmp" in rep.co_varnames
    table = {co: ((int,), rep)}
    assert T.run_with_compiler(compiler_for(table), lambda: (f(3), f(4.0))) == (60, 14.0)


def test_frame_growth_extra_locals_and_extended_arg(mode):
    def f(a, b):
        return None
    f = fresh(f)
    co = f.__code__
    n = 300
    steps = [("prologue",)]
    for i in range(n):
        steps += [("load_fast", "a"), ("store_fast", "t%d" % i)]
    steps += [("load_fast", "t%d" % i) for i in range(n)]
    steps += [("op", "BUILD_TUPLE", n), ("return_value",)]
    rep = T.assemble(co, steps)
    assert rep.co_stacksize >= n
    assert dis.opmap["EXTENDED_ARG"] in rep.co_code[::2]
    d0 = T.datastack_info()
    r = T.run_with_compiler(compiler_for({co: ((int, int), rep)}), lambda: [f(7, 8) for _ in range(50)])
    assert r[-1] == (7,) * n
    assert T.datastack_info() == d0
    st = T.stats()
    assert st["swaps"] + st["calls"] == 50
    if mode == "swap":
        assert st["swaps"] > 0  # grown in place unless the data-stack chunk was full


def fact(n):
    return -1  # wrong on purpose: the replacement computes n!


def _fact_replacement():
    co = fact.__code__
    return T.assemble(co, [
        ("line", co.co_firstlineno + 1), ("prologue",),
        ("load_fast", "n"), ("load_const", 1), ("op", "COMPARE_OP", compare_arg("<=")),
        ("jump", "POP_JUMP_IF_FALSE", "recurse"),
        ("load_const", 1), ("return_value",),
        ("label", "recurse"),
        ("load_fast", "n"), ("load_global", "fact", True), ("load_fast", "n"), ("load_const", 1),
        ("op", "BINARY_OP", binop_arg("-")), ("call", 1),
        ("op", "BINARY_OP", binop_arg("*")), ("return_value",)])


def test_recursion_through_the_original_function(mode):
    import math
    table = {fact.__code__: ((int,), _fact_replacement())}
    d0 = T.datastack_info()
    assert T.run_with_compiler(compiler_for(table), fact, 10) == math.factorial(10)
    # deep enough to cross data-stack chunks (3.12 call mode frees them
    # itself); below the ~740 frames 3.12.1 allows while a hook is set
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 5000))
    try:
        assert T.run_with_compiler(None, fact, 600) == math.factorial(600)
    finally:
        sys.setrecursionlimit(old)
    assert T.datastack_info() == d0
    assert T.stats()["hits"] == 10 + 600
    assert fact(5) == -1


def test_recursion_limit_enforced(mode):
    table = {fact.__code__: ((int,), _fact_replacement())}
    d0 = T.datastack_info()
    with pytest.raises(RecursionError):
        T.run_with_compiler(compiler_for(table), fact, 100000)
    assert T.datastack_info() == d0


def deep(n):
    return -1  # wrong on purpose: the replacement computes n


def test_swap_falls_back_to_call_when_the_chunk_is_full():
    """A replacement 400 locals larger than the original, recursing: the
    frame can grow in place only while the data-stack chunk has room, so
    some calls run in call mode (on 3.12 they dispose of the frame)."""
    co = deep.__code__
    steps = [("line", co.co_firstlineno + 1), ("prologue",)]
    for i in range(400):
        steps += [("load_fast", "n"), ("store_fast", "t%d" % i)]
    steps += [("load_fast", "t399"), ("load_const", 0), ("op", "COMPARE_OP", compare_arg("<=")),
              ("jump", "POP_JUMP_IF_FALSE", "recurse"), ("load_const", 0), ("return_value",),
              ("label", "recurse"),
              ("load_global", "deep", True), ("load_fast", "t0"), ("load_const", 1),
              ("op", "BINARY_OP", binop_arg("-")), ("call", 1),
              ("load_const", 1), ("op", "BINARY_OP", binop_arg("+")), ("return_value",)]
    table = {co: ((int,), T.assemble(co, steps))}
    d0 = T.datastack_info()
    assert T.run_with_compiler(compiler_for(table), deep, 300) == 300
    assert T.datastack_info() == d0
    st = T.stats()
    assert st["swaps"] > 0 and st["calls"] > 0 and st["swaps"] + st["calls"] == 301
    assert deep(3) == -1


def test_exception_traceback_from_replacement(mode):
    def f(a, b):
        return a + b
    f = fresh(f)

    def compiled_fn(a, b):
        raise ValueError("boom %s" % a)

    table = {f.__code__: ((int, int), T.make_call_replacement(f.__code__, compiled_fn))}

    def body():
        return f(1, 2)

    with pytest.raises(ValueError, match="boom 1") as info:
        T.run_with_compiler(compiler_for(table), body)
    tb = traceback.extract_tb(info.value.__traceback__)
    assert [fr.name for fr in tb[-3:]] == ["body", "f", "compiled_fn"]
    assert (tb[-2].filename, tb[-2].lineno) == (f.__code__.co_filename, f.__code__.co_firstlineno)


def test_no_reference_leaks_on_hits(mode):
    def f(a, b):
        return None
    f = fresh(f)
    table = {f.__code__: ((Tensorish, Tensorish), T.make_call_replacement(f.__code__, lambda a, b: b))}
    x, y = Tensorish(1), Tensorish(2)
    T.run_with_compiler(compiler_for(table), f, x, y)  # compile once
    rx, ry, rf = sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(f)
    r = T.run_with_compiler(None, lambda: [f(x, y) for _ in range(1000)])
    assert all(v is y for v in r)
    del r
    assert (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(f)) == (rx, ry, rf)


def test_different_argument_names_run_in_call_mode():
    def f(a, b):
        return "orig"
    f = fresh(f)

    def other(p, q):  # same slots, other names: not swapped into f's frame
        return ("other", p, q)

    assert T.run_with_compiler(compiler_for({f.__code__: ((int, int), other.__code__)}), f, 1, 2) == ("other", 1, 2)
    st = T.stats()
    assert (st["calls"], st["swaps"]) == (1, 0)




def test_graph_break_end_to_end(mode):
    """A miniature TorchDynamo: paper_f becomes
         x = compiled_fn_0(a, b); ___stack0 = _sink(x); return resume_at_N(x, a, ___stack0)"""
    co = paper_f.__code__
    offset = offset_after_call_to(co, "_sink")
    resume = types.FunctionType(T.make_resume(co, offset, 1, ("x", "a")), paper_f.__globals__)
    graphs = []

    def compiled_fn_0(a, b):
        graphs.append((a, b))
        return a + b

    main = T.assemble(co, [
        ("line", co.co_firstlineno + 1), ("prologue",),
        ("push_null",), ("load_const", compiled_fn_0), ("load_fast", "a"), ("load_fast", "b"), ("call", 2),
        ("store_fast", "x"),
        ("load_global", "_sink", True), ("load_fast", "x"), ("call", 1), ("store_fast", "___stack0"),
        ("push_null",), ("load_const", resume), ("load_fast", "x"), ("load_fast", "a"),
        ("load_fast", "___stack0"), ("call", 3), ("return_value",)])

    def compiler(code, f_locals, func):
        if code is co and type(f_locals["a"]) is int and type(f_locals["b"]) is int:
            return ((int, int), main)
        return None if code is co else False

    SINK.clear()
    out = T.run_with_compiler(compiler, lambda: [paper_f(1, 2), paper_f(10, 5), paper_f(1.0, 2.0)])
    assert out == [paper_f(1, 2), paper_f(10, 5), paper_f(1.0, 2.0)] == [5, 20, 5.0]
    assert SINK[:3] == [3, 15, 3.0]  # the unsupported call ran once per call
    assert graphs == [(1, 2), (10, 5)]
    assert T.cache_size(co) == 1
