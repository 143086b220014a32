"""Exceptions inside the trace, continued (see test_capture_exceptions.py): more
handler shapes, what still breaks (never a wrong result), graph breaks inside
try blocks, errors of C code on constants, and, without torch, the exception
table the evaluator unwinds with against CPython's own (3.11 here, 3.12's
bytecode where another CPython is installed)."""
import os
import subprocess
import sys
import sysconfig
import textwrap

import pytest
import torch
from torch import nn

import pt2
from test_capture import compare, r
from test_capture_objects import check, counts, run_both

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

from test_capture_exceptions import Config, _lookup, raises_like_eager  # noqa: E402


# ---------------------------------------------------------------- more handler shapes


def swallow_in_finally(x):
    try:
        raise ValueError("swallowed")
    finally:
        return x + 1


def continue_in_finally(x, n):
    for i in range(n):
        try:
            if i % 2:
                raise KeyError(i)
            x = x + 1
        except KeyError:
            x = x * 2
            continue
        finally:
            x = x - 0.5
    return x


def many_unwinds(x):
    d = {"a": 1.0}
    for k in ["b"] * 30 + ["a"]:
        try:
            x = x + d[k]
        except KeyError:
            x = x * 1.01
    return x


def _inner_no_grad(x):
    with torch.no_grad():
        y = x * 2
        raise ValueError("in no_grad")


def no_grad_inlined(x):
    try:
        y = _inner_no_grad(x)
    except ValueError:
        y = x * (5 if torch.is_grad_enabled() else 7)
    return y


def handler_raises_other(x):
    try:
        try:
            raise KeyError("a")
        except KeyError:
            raise IndexError("b")
    except IndexError:
        x = x + 3
    return x


def raise_e_again(x):
    try:
        try:
            raise ValueError("v")
        except ValueError as e:
            x = x + 1
            raise e
    except ValueError:
        x = x * 2
    return x


def closure_raises(x):
    k = "missing"
    def get(d):
        return d[k]
    try:
        return get({}) * x
    except KeyError:
        return x - 1


class Child(nn.Module):
    def forward(self, x):
        if x.shape[-1] > 2:
            raise ValueError("too wide")
        return x

class Parent(nn.Module):
    def __init__(self):
        super().__init__(); self.child = Child(); self.lin = nn.Linear(4, 4)
    def forward(self, x):
        try:
            y = self.child(x)
        except ValueError:
            y = self.lin(x)
        return y


# compiled outside pytest's assertion rewriting, as a user's module is
_ns = {}
exec(compile(textwrap.dedent("""
    def assert_caught(x, n):
        try:
            assert n < 2, "n too big"
            y = x
        except AssertionError:
            y = -x
        return y
"""), __file__, "exec"), _ns)
assert_caught = _ns["assert_caught"]


def listcomp_raises(x, d):
    try:
        vals = [d[k] for k in ("a", "b")]
    except KeyError:
        vals = [0.0]
    return x + sum(vals)


def escapes_with_cause(x):
    try:
        {}["k"]
    except KeyError as e:
        raise RuntimeError("wrapped") from e


def while_true_stop(x):
    it = iter(range(5))
    total = x
    while True:
        try:
            i = next(it)
        except StopIteration:
            break
        total = total + i
    return total


def gen_expr_next(x):
    g = (i for i in range(0))
    try:
        v = next(g)
    except StopIteration:
        v = 9
    return x * v


@pytest.mark.parametrize("fn,make", [
    (swallow_in_finally, lambda: (r(3),)),
    (continue_in_finally, lambda: (r(3), 5)),
    (many_unwinds, lambda: (r(3),)),
    (no_grad_inlined, lambda: (r(3),)),
    (handler_raises_other, lambda: (r(3),)),
    (raise_e_again, lambda: (r(3),)),
    (closure_raises, lambda: (r(3),)),
    (assert_caught, lambda: (r(3), 5)),
    (listcomp_raises, lambda: (r(3), {"a": 1.0})),
    (while_true_stop, lambda: (r(3),)),
    (gen_expr_next, lambda: (r(3),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_more_handler_shapes(fn, make):
    check(fn, make)


def test_exception_from_submodule_caught_in_parent():
    torch.manual_seed(0)
    check(Parent().eval(), lambda: (r(2, 4),))


# ---------------------------------------------------------------- what still breaks: never a wrong result


def _gen(x):
    yield x
    raise ValueError("from the generator")


def generator_raises(x):
    out = []
    try:
        for v in _gen(x):
            out.append(v * 2)
    except ValueError:
        out.append(x)
    return torch.stack(out).sum(0)


def handler_reads_message(x):
    try:
        {}["key"]
    except KeyError as e:
        x = x * len(str(e))
    return x


def handler_returns_exception(x):
    try:
        raise ValueError("kept")
    except ValueError as e:
        return x + 1, e


def test_unsupported_uses_break_and_match_eager():
    # an exception leaving a generator (run to its end when it was called) is a break
    run_both(generator_raises, lambda: (r(3),))
    _, breaks, reasons = counts(generator_raises, r(3))
    assert breaks >= 1 and any("from the generator" in b.reason for b in reasons), reasons
    # the exception object beyond its class (str(e)) is a break
    run_both(handler_reads_message, lambda: (r(3),))
    pt2.reset()
    f = pt2.compile(handler_returns_exception)
    x = r(3)
    with torch.no_grad():
        for _ in range(2):
            out, err = f(x)
            ref, ref_err = handler_returns_exception(x)
            compare(out, ref, 1e-6)
            assert type(err) is ValueError and str(err) == "kept"


def not_matching(x):
    try:
        raise ValueError("escapes: not a KeyError")
    except KeyError:
        return x


def missing_key_escapes(x, d):
    return x * d["absent"]


def missing_attribute_escapes(x, cfg):
    return x * cfg.absent


def raise_in_helper_escapes(x):
    y = x + 1
    return _checked(y, 1)


def stop_iteration_escapes(x):
    it = iter([x])
    next(it)
    return next(it)


def test_exceptions_escaping_match_eager():
    raises_like_eager(not_matching, r(3))
    raises_like_eager(missing_key_escapes, r(3), {"present": 1.0})
    raises_like_eager(missing_attribute_escapes, r(3), Config(1.0))
    raises_like_eager(raise_in_helper_escapes, r(3))
    raises_like_eager(stop_iteration_escapes, r(3))
    raises_like_eager(user_exception_with_init_escapes, r(3))
    err = raises_like_eager(escapes_with_cause, r(3))
    assert type(err.__cause__) is KeyError


def user_exception_with_init_escapes(x):
    raise DetailedError(x.shape[0])


# ---------------------------------------------------------------- graph breaks inside try blocks


def opaque(x, fail=False):
    print("", end="")  # a graph break
    if fail:
        raise ValueError("opaque failed")
    return x


def break_in_try_then_raise(x, fail):
    y = x * 2
    try:
        y = opaque(y) + 1
        if fail:
            raise KeyError("after the break")
        y = y.sin()
    except KeyError:
        y = y - 10
    return y.exp()


def break_in_handler(x, d):
    y = x + 1
    try:
        y = y * _lookup(d, "missing")
    except KeyError:
        y = opaque(y) - 1
    return y.sin()


def break_in_finally_on_raise(x):
    y = x * 2
    try:
        try:
            y = y + _lookup({}, "k")
        finally:
            y = opaque(y) * 3
    except KeyError:
        y = y + 0.5
    return y


@pytest.mark.parametrize("fn,make", [
    (break_in_try_then_raise, lambda: (r(4), False)),
    (break_in_try_then_raise, lambda: (r(4), True)),
    (break_in_handler, lambda: (r(4), {})),
    (break_in_finally_on_raise, lambda: (r(4),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_break_inside_try_resumes_correctly(fn, make):
    run_both(fn, make)
    graphs, breaks, _ = counts(fn, *make())
    assert graphs >= 1 and breaks >= 1


def test_break_in_handler_resumes_at_the_raising_call():
    """A break inside a traced except clause reruns the call that raised in
    CPython: the graph before it is kept (the frame is not left eager)."""
    graphs, _, reasons = counts(break_in_handler, r(4), {})
    assert graphs >= 1, reasons
    assert any("print" in b.reason for b in reasons), reasons


# ---------------------------------------------------------------- errors of C code on constants


def int_of_text(x, text):
    try:
        n = int(text)
    except ValueError:
        n = -1
    return x * n


def divide_constants(x, a, b):
    try:
        q = a / b
    except ZeroDivisionError:
        q = 0.0
    return x + q


def tuple_index(x, i):
    dims = (2, 3)
    try:
        d = dims[i]
    except IndexError:
        d = 10
    return x * d


def len_of_number(x, n):
    try:
        k = len(n)
    except TypeError:
        k = 4
    return x * k


@pytest.mark.parametrize("fn,make", [
    (int_of_text, lambda: (r(3), "12")),
    (int_of_text, lambda: (r(3), "twelve")),
    (divide_constants, lambda: (r(3), 1.0, 0.0)),
    (divide_constants, lambda: (r(3), 1.0, 4.0)),
    (tuple_index, lambda: (r(3), 1)),
    (tuple_index, lambda: (r(3), 5)),
    (len_of_number, lambda: (r(3), 7)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_errors_of_constant_operations_are_caught(fn, make):
    check(fn, make)


# ---------------------------------------------------------------- the exception table, without torch

# Shapes whose handlers the evaluator unwinds to; the opcodes CPython emits on
# their exception paths must all be ones interp.c / exceptions.c model.
CORPUS = textwrap.dedent('''
    def try_except(d):
        try:
            v = d["k"]
        except KeyError as e:
            v = 0
        return v

    def try_finally_nested(x):
        try:
            try:
                x = x + 1
            except (ValueError, TypeError):
                raise
            finally:
                x = x * 2
        except Exception:
            x = -x
        return x

    def with_block(cm, x):
        with cm:
            x = x + 1
        return x

    def comprehension(d, keys):
        try:
            return [d[k] for k in keys]
        except KeyError:
            return None

    def loop_try(xs):
        out = 0
        for x in xs:
            try:
                out += x
            except TypeError:
                continue
            finally:
                out -= 1
        return out

    def reraise_from(x):
        try:
            x.missing
        except AttributeError as e:
            raise ValueError("v") from e
''')

MODELED = {
    # exceptions.c
    "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "RERAISE", "RAISE_VARARGS", "WITH_EXCEPT_START",
    # interp.c, as on normal paths
    "NOP", "POP_TOP", "COPY", "SWAP", "LOAD_CONST", "RETURN_CONST", "RETURN_VALUE", "LOAD_FAST", "LOAD_FAST_CHECK",
    "STORE_FAST", "DELETE_FAST", "LOAD_GLOBAL", "LOAD_ATTR", "BUILD_TUPLE", "BINARY_OP", "UNARY_NEGATIVE", "PUSH_NULL",
    "PRECALL", "CALL", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_IF_TRUE",
    "POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_FALSE",
}

CHECK_SCRIPT = textwrap.dedent('''
    import dis, json, sys
    sys.path.insert(0, sys.argv[1])
    import _pt2_frame_test as T
    ns = {}
    exec(compile(sys.argv[2], "<corpus>", "exec"), ns)
    report = {}
    for name, fn in ns.items():
        if not callable(fn) or name.startswith("__"):
            continue
        co = fn.__code__
        ins = T.decode(co)
        table = T.exception_table(co)
        depths = T.stack_depths(co)
        index = {i[2]: k for k, i in enumerate(ins)}
        # CPython's own reading of its table (dis), per instruction offset
        entries = dis.Bytecode(co).exception_entries
        expected = {}
        for e in entries:
            for off in range(e.start, e.end, 2):
                if off in index:
                    expected[index[off]] = (index[e.target], e.depth, e.lasti)
        handler_ops, bad = set(), []
        for k, (handler, depth, lasti) in enumerate(table):
            want = expected.get(k, (-1, 0, False))
            if (handler, depth, lasti) != want:
                bad.append((ins[k][0], ins[k][2], (handler, depth, lasti), want))
            if handler >= 0:
                # the evaluator unwinds to depth values, then lasti, then the
                # exception: the depth the flow analysis finds at the handler
                if depths[handler] != depth + int(lasti) + 1:
                    bad.append(("depth at handler", ins[handler][2], depths[handler], depth + int(lasti) + 1))
        starts = sorted({e.target for e in entries})
        for start in starts:  # every instruction reachable from a handler, up to its end
            k = index[start]
            while k < len(ins):
                op = ins[k][0]
                handler_ops.add(op)
                if op in ("RERAISE", "RETURN_VALUE", "RETURN_CONST", "JUMP_FORWARD", "JUMP_BACKWARD",
                          "JUMP_BACKWARD_NO_INTERRUPT", "RAISE_VARARGS"):
                    break
                k += 1
        report[name] = {"bad": bad, "handler_ops": sorted(handler_ops), "entries": len(entries)}
    print(json.dumps(report))
''')


def _check_table(python, module_dir):
    p = subprocess.run([python, "-c", CHECK_SCRIPT, module_dir, CORPUS], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    import json
    report = json.loads(p.stdout)
    assert set(report) == {"try_except", "try_finally_nested", "with_block", "comprehension", "loop_try", "reraise_from"}
    for name, rep in report.items():
        assert rep["entries"] > 0, name
        assert rep["bad"] == [], (name, rep["bad"])
        unmodeled = set(rep["handler_ops"]) - MODELED
        assert not unmodeled, (name, unmodeled)


def test_exception_table_matches_cpython_here():
    built = os.path.join(REPO, "build", "python")
    pytest.importorskip("_pt2_frame_test", reason="build the _pt2_frame_test target (CMake) first")
    import _pt2_frame_test
    _check_table(sys.executable, os.path.dirname(_pt2_frame_test.__file__) or built)


def _other_pythons():
    root = "/root/.pyenv/versions"
    found = []
    for v in ("3.11", "3.12"):
        if os.path.isdir(root):
            for d in sorted(os.listdir(root)):
                exe = os.path.join(root, d, "bin", "python3")
                if d.startswith(v + ".") and os.path.exists(exe) and os.path.realpath(exe) != os.path.realpath(sys.executable):
                    found.append(exe)
    return found


def _build_frame_test(python):
    """_pt2_frame_test (hook.c, bytecode*.c, frame_testmod.c: no torch) for
    another CPython, into build/frame-test-<version>/ (rebuilt when a source
    is newer)."""
    info = subprocess.run([python, "-c", "import sysconfig, sys; print(sysconfig.get_paths()['include']); "
                           "print(sysconfig.get_config_var('EXT_SUFFIX')); print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        pytest.skip(f"{python}: {info.stderr.strip()}")
    include, suffix, version = info.stdout.split()
    if not os.path.exists(os.path.join(include, "internal", "pycore_frame.h")):
        pytest.skip(f"{python} has no internal headers")
    out_dir = os.path.join(REPO, "build", f"frame-test-{version}")
    out = os.path.join(out_dir, "_pt2_frame_test" + suffix)
    capture = sorted(os.listdir(os.path.join(REPO, "capture")))
    bytecode = [f for f in capture if f.startswith("bytecode") and f.endswith(".c")]
    sources = [os.path.join(REPO, "capture", f) for f in ["hook.c", *bytecode, "frame_testmod.c"]]
    headers = [os.path.join(REPO, "capture", f) for f in capture if f.endswith(".h")]
    if not os.path.exists(out) or any(os.path.getmtime(s) > os.path.getmtime(out) for s in sources + headers):
        os.makedirs(out_dir, exist_ok=True)
        cc = sysconfig.get_config_var("CC") or "cc"
        cmd = cc.split()[:1] + ["-std=c11", "-O1", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{include}",
                                f"-I{os.path.join(REPO, 'capture')}", f"-I{os.path.join(REPO, 'include')}", "-o", out] + sources
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            pytest.skip(f"cannot build _pt2_frame_test for {python}: {p.stderr[-500:]}")
    return out_dir


@pytest.mark.parametrize("python", _other_pythons() or [None])
def test_exception_table_matches_cpython_on_other_versions(python):
    if python is None:
        pytest.skip("no other CPython 3.11/3.12 under /root/.pyenv/versions")
    _check_table(python, _build_frame_test(python))
