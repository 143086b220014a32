"""`==`, `!=`, `in` and list.count/index between Python objects inside compiled code, against eager:
a class's Python __eq__/__ne__ is called as CPython calls it (the reflected side, NotImplemented,
`!=` as `not __eq__`), an IntEnum equals its int, a plain Enum or object compares by identity, and
each answer holds for later calls only while the objects are the same ones (their identities are
guarded: Mode.B after Mode.A recompiles).  A list never equals a tuple (torch.Size is one)."""
import enum

import torch

import pt2
from test_capture import compare


class P:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, P) and self.v == other.v

    __hash__ = None


class NeOnly:
    def __init__(self, v):
        self.v = v

    def __ne__(self, other):
        return "ne called"


class Base:
    def __eq__(self, other):
        return NotImplemented


class Derived(Base):
    def __eq__(self, other):
        return True


class Plain:
    pass


class Mode(enum.Enum):
    A = 1
    B = 2


class IMode(enum.IntEnum):
    A = 1
    B = 2


def same_calls(fn, *arg_sets):
    """One compiled function over several argument sets in turn (cache hits and recompiles): each
    call's result against eager's."""
    pt2.reset()
    compiled = pt2.compile(fn)
    x = torch.zeros(2)
    for args in arg_sets:
        compare(compiled(x, *args), fn(x, *args), 0)


def branch_eq(x, a, b):
    return x + 1 if a == b else x - 1


def branch_ne(x, a, b):
    return x + 1 if a != b else x - 1


def test_python_eq_is_called():
    same_calls(branch_eq, (P(1), P(1)), (P(1), P(2)), (P(3), P(3)), (P(1), 1))
    same_calls(branch_ne, (P(1), P(1)), (P(1), P(2)))


def test_own_ne_and_reflected_subclass():
    same_calls(lambda x, a, b: (x, a != b), (NeOnly(1), NeOnly(1)))
    # the right side's class is a subclass with its own __eq__: it is asked first
    same_calls(branch_eq, (Base(), Derived()), (Derived(), Base()), (Base(), Base()))


def test_enums_and_identity_are_guarded():
    def f(x, m):
        if m == Mode.A:
            return x + 1
        return x - 1

    same_calls(f, (Mode.A,), (Mode.B,), (Mode.A,))
    same_calls(branch_eq, (IMode.A, 1), (IMode.B, 1), (IMode.A, 1.0), (IMode.A, IMode.A))
    q = Plain()
    same_calls(branch_eq, (q, q), (q, Plain()), (Plain(), q))
    same_calls(branch_ne, (q, q), (q, Plain()))


def test_enum_config_attribute():
    class Cfg:
        def __init__(self, mode):
            self.mode = mode

    def f(x, cfg):
        return x * 2 if cfg.mode == Mode.A else x * 3

    same_calls(f, (Cfg(Mode.A),), (Cfg(Mode.B),), (Cfg(Mode.A),))


def test_membership_and_count_use_eq():
    same_calls(lambda x, a: (x, a in [P(0), P(1)], a not in (P(5),)), (P(1),), (P(2),), (P(5),))
    same_calls(lambda x, a: (x, [P(1), P(1), P(2)].count(a), [P(2), P(1)].index(a)), (P(1),), (P(2),))
    same_calls(lambda x, m: (x, m in (Mode.A,), [1, 2].count(m)), (Mode.A,), (Mode.B,), (IMode.B,))


def test_list_never_equals_tuple():
    def f(x, seq):
        return (x + 1 if list(x.shape) == (2,) else x - 1, x.shape == [2], (2,) == x.shape,
                seq == (1, 2), seq != (1, 2), [1, 2] == seq)

    same_calls(f, ([1, 2],), ((1, 2),))


def test_sequence_ordering_is_decided_at_trace_time():
    """`<`, `<=`, `>`, `>=` between tuples and lists of constants (a device capability against (8, 0),
    a shape against a bound) are Python's lexicographic answers, with no graph break; a list against
    a tuple raises eager's TypeError."""

    def f(x, bound):
        cap = (x.shape[0] // 2, 0)
        r = x
        if cap >= (8, 0):
            r = r + 1
        if (2, 1) < tuple(x.shape):
            r = r * 2
        if list(x.shape) <= bound:
            r = r - 3
        if x.shape > (9,):
            r = r * 5
        return r, x.shape == None, cap <= cap  # noqa: E711

    for shape, bound in (((16, 3), [9, 3]), ((9, 3), [9, 3]), ((9, 4), [9, 3]), ((2, 1), [2])):
        x = torch.randn(shape)
        explained = pt2.explain(f)(x, bound)
        assert explained.graph_break_count == 0, explained.break_reasons
    same_calls(lambda x, bound: f(x.expand(16, 2), bound), ([9, 3],), ([16, 2],), ([16, 1, 0],))

    def mixed(x, seq):
        return x + 1 if seq < (1, 2) else x

    compiled = pt2.compile(mixed)
    for fn in (mixed, compiled):
        try:
            fn(torch.zeros(2), [1, 2])
        except TypeError as e:
            assert "'<' not supported" in str(e)
        else:
            raise AssertionError("a list < a tuple must raise TypeError")
