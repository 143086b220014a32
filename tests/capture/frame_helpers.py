"""Shared by the tests of capture/'s frame layer (test_frame_hook.py,
test_frame_replacements.py, test_frame_bytecode.py), which run hook.c and
bytecode*.c through _pt2_frame_test.

The test compiler is a Python callable (code, f_locals_at_entry, func) ->
None (run the original) | False (skip the code) | (guard_spec, replacement);
guard_spec holds one exact type (or None) per leading argument slot.
Expected values come from running the original Python code, from `dis`, or
are worked out by hand.  Never imports torch (runs on interpreters without it).

A test module takes the fixtures by importing them:
    from frame_helpers import clean_state, mode  # noqa: F401  (pytest fixtures)
"""
import dis
import os
import sys
import types

import pytest

T = pytest.importorskip("_pt2_frame_test", reason="build the _pt2_frame_test target (CMake) first")

PY312 = sys.version_info >= (3, 12)
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(autouse=True)
def clean_state():
    T.reset()
    T.reset_stats()
    T.set_recompile_limit(8)
    T.set_swap_mode(True)
    assert T.eval_frame_is_default()
    yield
    T.reset()
    T.set_recompile_limit(8)
    T.set_swap_mode(True)
    assert T.eval_frame_is_default(), "the hook stayed installed after the test"


@pytest.fixture(params=["swap", "call"])
def mode(request):
    """Runs the test in swap mode and with every replacement in call mode."""
    T.set_swap_mode(request.param == "swap")
    yield request.param
    T.set_swap_mode(True)


def fresh(func):
    """A copy of func with its own code object (so its cache starts empty)."""
    co = func.__code__
    co = co.replace(co_consts=co.co_consts + (object(),))
    new = types.FunctionType(co, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
    new.__kwdefaults__ = func.__kwdefaults__
    return new


def compiler_for(table, log=None):
    """A compiler serving replacements from {code: (guard_spec, replacement)};
    other code runs as it is (None)."""
    def compiler(code, f_locals, func):
        if log is not None:
            log.append((code.co_name, dict(f_locals)))
        return table.get(code)
    return compiler


def operand_of(src, opname):
    """The oparg this interpreter's compiler emits for `opname` in src
    (COMPARE_OP's encoding changed in 3.12; never hand-build it)."""
    for ins in dis.get_instructions(compile(src, "<operand>", "eval")):
        if ins.opname == opname:
            return ins.arg
    raise LookupError(opname)


def compare_arg(op):
    return operand_of("a %s b" % op, "COMPARE_OP")


def binop_arg(op):
    return operand_of("a %s b" % op, "BINARY_OP")


def offset_after_call_to(code, funcname):
    """Byte offset of the instruction after the CALL of global `funcname`."""
    ins = list(dis.get_instructions(code))
    seen = False
    for i, x in enumerate(ins):
        if x.opname == "LOAD_GLOBAL" and x.argval == funcname:
            seen = True
        if seen and x.opname == "CALL":
            return ins[i + 1].offset
    raise LookupError(funcname)


def line_of(func, text):
    import inspect
    lines, start = inspect.getsourcelines(func)
    for k, line in enumerate(lines):
        if text in line:
            return start + k
    raise LookupError(text)


class Tensorish:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


# ---------------------------------------------------------------------------
# the paper's graph-break example (_sink is the unsupported call), shared by
# the replacement, assembler and resume_at tests
# ---------------------------------------------------------------------------
def _sink(v):
    SINK.append(v)


SINK = []


def paper_f(a, b):
    x = a + b
    _sink(x)  # "unsupported": the graph breaks here
    y = x * 2
    return y - a
