"""capture/'s bytecode files (bytecode*.c) through _pt2_frame_test:
decoding against `dis`, decode + encode round trips of the stdlib, stack
depths, the Pt2Asm assembler, and resume_at_<offset> continuations.
Helpers and fixtures: frame_helpers.py."""
import dis
import os
import time
import traceback
import types

import pytest

from frame_helpers import (PY312, SINK, T, _sink, binop_arg, clean_state, line_of,  # noqa: F401
                           offset_after_call_to, paper_f)


# ---------------------------------------------------------------------------
# bytecode: decoding, stack depth, the assembler
# ---------------------------------------------------------------------------
def _stdlib_code_objects(limit_modules=None):
    stdlib = os.path.dirname(os.__file__)
    names = sorted(n for n in os.listdir(stdlib) if n.endswith(".py"))
    for name in names[:limit_modules]:
        try:
            with open(os.path.join(stdlib, name), encoding="utf-8") as fh:
                top = compile(fh.read(), name, "exec")
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        stack = [top]
        while stack:
            co = stack.pop()
            stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
            yield name, co


def test_roundtrip_stdlib():
    """Decode + reassemble every code object of the stdlib's top-level
    modules: identical bytes, exception table, stack size and positions."""
    n = n_ext = 0
    t0 = time.time()
    for name, co in _stdlib_code_objects():
        rt = T.roundtrip(co)
        n += 1
        n_ext += dis.opmap["EXTENDED_ARG"] in co.co_code[::2]
        where = (name, co.co_qualname)
        assert rt.co_code == co.co_code, where
        assert rt.co_exceptiontable == co.co_exceptiontable, where
        assert rt.co_stacksize == co.co_stacksize, where
        assert list(rt.co_positions()) == list(co.co_positions()), where
    print("\nround-tripped %d stdlib code objects (%d with EXTENDED_ARG) in %.1f s" % (n, n_ext, time.time() - t0))
    assert n > 5000 and n_ext > 50


def _dis_exception_handlers(co):
    """instruction offset -> handler target offset, from dis's own parser."""
    out = {}
    for entry in dis._parse_exception_table(co):
        for off in range(entry.start, entry.end, 2):
            out[off] = entry.target
    return out


def test_decode_matches_dis():
    checked = 0
    for name, co in _stdlib_code_objects(limit_modules=40):
        ours = T.decode(co)
        theirs = [i for i in dis.get_instructions(co) if i.opname not in ("CACHE", "EXTENDED_ARG")]
        assert len(ours) == len(theirs), (name, co.co_qualname)
        offset_index = {ins[2]: k for k, ins in enumerate(ours)}
        handlers = _dis_exception_handlers(co)
        positions = list(co.co_positions())
        for k, (mine, ref) in enumerate(zip(ours, theirs)):
            opname, arg, offset, start, nxt, target, line, handler = mine
            assert (opname, offset) == (ref.opname, ref.offset)
            assert arg == (ref.arg if ref.arg is not None else 0)
            assert start <= offset < nxt
            if ref.opcode in dis.hasjrel:
                assert ours[target][2] == ref.argval or ours[target][3] == ref.argval
            else:
                assert target == -1
            ref_line = positions[offset // 2][0]
            assert line == (ref_line if ref_line is not None else -1)
            assert handler == (offset_index[handlers[offset]] if offset in handlers else -1)
        k = len(ours) // 2
        assert T.index_of_offset(co, ours[k][2]) == T.index_of_offset(co, ours[k][3]) == k
        checked += 1
    assert checked > 1000


def test_stack_depth_hand_computed():
    def g(a, b):
        return a + b
    # RESUME, LOAD_FAST a, LOAD_FAST b, BINARY_OP, RETURN_VALUE
    assert T.stack_depths(g.__code__) == [0, 0, 1, 2, 1]

    def loop_f(a, n):
        total = 0
        for i in range(n):
            total += a * i
            _sink(total)
        return total

    ins = T.decode(loop_f.__code__)
    depths = T.stack_depths(loop_f.__code__)
    at = T.index_of_offset(loop_f.__code__, offset_after_call_to(loop_f.__code__, "_sink"))
    assert ins[at - 1][0] == "CALL"
    assert depths[at] == 2  # [range iterator, _sink result]
    for_iter = [k for k, i in enumerate(ins) if i[0] == "FOR_ITER"][0]
    assert depths[for_iter] == 1
    for name, co in _stdlib_code_objects(limit_modules=10):
        assert max(T.stack_depths(co)) <= co.co_stacksize


def test_assembler_loops_calls_and_attributes():
    def template(a, n):
        pass

    co = template.__code__
    loop = [("prologue",),
            ("load_const", 0), ("store_fast", "total"),
            ("load_global", "range", True), ("load_fast", "n"), ("call", 1), ("op", "GET_ITER"),
            ("label", "top"), ("jump", "FOR_ITER", "end"), ("store_fast", "i"),
            ("load_fast", "total"), ("load_fast", "i"), ("op", "BINARY_OP", binop_arg("+")),
            ("store_fast", "total"), ("jump", "JUMP", "top"),
            ("label", "end")]
    if "END_FOR" in dis.opmap:
        loop.append(("op", "END_FOR"))
    loop += [("load_fast", "total"), ("return_value",)]
    f = types.FunctionType(T.assemble(co, loop), {"range": range})
    assert f(None, 10) == 45
    ops = [i.opname for i in dis.get_instructions(f.__code__)]
    assert "JUMP_BACKWARD" in ops and ("PRECALL" in ops) == (not PY312)

    def key_fn(x, key):
        return (x, key)

    kw = T.assemble(co, [("prologue",), ("push_null",), ("load_const", key_fn), ("load_fast", "a"),
                         ("load_fast", "n"), ("call_kw", 2, ("key",)), ("return_value",)])
    assert types.FunctionType(kw, {})(1, 2) == (1, 2)
    meth = T.assemble(co, [("prologue",), ("load_fast", "a"), ("load_method", "upper"), ("call", 0),
                           ("load_fast", "n"), ("load_attr", "real"), ("op", "BUILD_TUPLE", 2),
                           ("return_value",)])
    assert types.FunctionType(meth, {})("ab", 3) == ("AB", 3)


def test_assembler_caches_follow_the_running_interpreter():
    import opcode
    co = T.make_call_replacement(paper_f.__code__, lambda a, b: None)
    ins = list(dis.get_instructions(co, show_caches=True))
    for k, i in enumerate(ins):
        if i.opname != "CACHE":
            n = opcode._inline_cache_entries[i.opcode]
            assert [x.opname for x in ins[k + 1:k + 1 + n]] == ["CACHE"] * n, i.opname


def test_assembler_reports_errors():
    co = paper_f.__code__
    with pytest.raises(ValueError, match="never placed"):
        T.assemble(co, [("prologue",), ("jump", "JUMP", "nowhere"), ("return_value",)])
    if PY312:  # 3.12 has no backward conditional jumps
        with pytest.raises(ValueError, match="cannot jump backward"):
            T.assemble(co, [("prologue",), ("label", "x"), ("load_const", True),
                            ("jump", "POP_JUMP_IF_TRUE", "x"), ("load_const", None), ("return_value",)])


def test_long_jump_extended_arg_roundtrip():
    body = "\n".join("        x = x + %d" % i for i in range(200))
    ns = {}
    exec("def big(x, c):\n    if c:\n%s\n    return x\n" % body, ns)
    big = ns["big"]
    rt = T.roundtrip(big.__code__)
    assert rt.co_code == big.__code__.co_code
    g = types.FunctionType(rt, ns)
    assert (g(0, True), g(0, False)) == (big(0, True), big(0, False))


# ---------------------------------------------------------------------------
# resume_at_<offset> continuations
# ---------------------------------------------------------------------------
def loop_f(a, n):
    total = 0
    for i in range(n):
        total += a * i
        _sink(total)  # graph break inside the loop: the iterator is on the stack
    return total


def try_f(a, b):
    x = a + 1
    _sink(x)
    try:
        y = x // b
    except ZeroDivisionError:
        y = -1
    return y


def raise_f(a, b):
    x = a + 1
    _sink(x)
    z = x // b  # RAISE_LINE
    return z


def cell_f(a):
    k = a * 10
    _sink(k)
    g = lambda: k + a  # noqa: E731
    return g()


def _resume(func, live):
    offset = offset_after_call_to(func.__code__, "_sink")
    depth = T.stack_depths(func.__code__)[T.index_of_offset(func.__code__, offset)]
    return offset, types.FunctionType(T.make_resume(func.__code__, offset, depth, live), globals())


def test_resume_paper_example():
    offset, resume = _resume(paper_f, ("x", "a"))
    assert resume.__code__.co_varnames[:3] == ("x", "a", "___stack0")  # live locals first
    assert resume.__code__.co_name == "resume_at_%d" % offset
    SINK.clear()
    assert resume(3, 1, None) == paper_f(1, 2)
    assert SINK == [3]  # only the original's _sink ran: the continuation starts after it


def test_resume_mid_loop():
    offset, resume = _resume(loop_f, ("a", "total"))
    it = iter(range(5))
    i = next(it)
    total = 0 + 3 * i
    assert resume(3, total, it, _sink(total)) == loop_f(3, 5)


def test_resume_try_except():
    _, resume = _resume(try_f, ("x", "b"))
    assert resume(8, 2, None) == try_f(7, 2)
    assert resume(8, 0, None) == -1  # handler found through the shifted exception table


def test_resume_traceback_points_at_original_line():
    offset, resume = _resume(raise_f, ("x", "b"))
    with pytest.raises(ZeroDivisionError) as info:
        resume(2, 0, None)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.name, last.lineno, last.filename) == (
        "resume_at_%d" % offset, line_of(raise_f, "RAISE_LINE"), raise_f.__code__.co_filename)


def test_resume_cell_variable():
    _, resume = _resume(cell_f, ("k", "a"))
    assert "k" in resume.__code__.co_cellvars
    assert resume(40, 4, None) == cell_f(4)


def test_resume_unbound_local_raises():
    # `total` not passed: on 3.12 its LOAD_FAST became LOAD_FAST_CHECK
    _, resume = _resume(loop_f, ("a",))
    with pytest.raises(UnboundLocalError):
        resume(3, iter(range(3)), None)


def test_resume_rejects_wrong_depth_and_names():
    offset = offset_after_call_to(paper_f.__code__, "_sink")
    with pytest.raises(ValueError, match="stack depth"):
        T.make_resume(paper_f.__code__, offset, 0, ("x",))
    with pytest.raises(ValueError, match="not a local"):
        T.make_resume(paper_f.__code__, offset, 1, ("nope",))
