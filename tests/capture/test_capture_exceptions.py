"""Exceptions inside the trace (capture/exceptions.c, docs/capture.md
"Exceptions"): try/except/else/finally and with blocks traced through the
exception table.  Each case is compared with eager (the second call runs the
cache-hit path); graph and break counts are checked where the point is that
nothing breaks.  The last section checks, without torch, that the exception
table the evaluator unwinds with is CPython's own, on this interpreter and on
the other CPythons installed beside it (3.12's bytecode)."""
import collections

import pytest
import torch
from torch import nn

import pt2
from test_capture import compare, r
from test_capture_objects import check, run_both



def raises_like_eager(fn, *args):
    """The compiled fn raises what eager raises: same type and message, on
    the first call and on the cache-hit path."""
    pt2.reset()
    compiled = pt2.compile(fn)
    with pytest.raises(BaseException) as eager:
        fn(*args)
    for _ in range(2):
        with pytest.raises(type(eager.value)) as got:
            compiled(*args)
        assert type(got.value) is type(eager.value)
        assert str(got.value) == str(eager.value)
    return eager.value


# ---------------------------------------------------------------- try blocks that do not raise


def try_except_else_finally(x):
    try:
        y = x * 2
    except ValueError:
        y = x
    else:
        y = y + 1
    finally:
        y = y - 0.5
    return y.relu()


def nested_tries(x):
    try:
        try:
            y = x.sin()
        finally:
            y = y * 2
        z = y + 1
    except (KeyError, IndexError):
        z = x
    else:
        z = z.cos()
    return z


def try_in_loop(x, n):
    # the range iterator stays on the stack under each try
    for i in range(n):
        try:
            x = x + i
        except ValueError:
            break
        finally:
            x = x * 0.5
    return x


def try_around_comprehension(x, n):
    # 3.12 inlines the comprehension with exception-table entries of its own
    try:
        ys = [x * i for i in range(n)]
    except ValueError:
        ys = [x]
    return torch.stack(ys).sum(0)


def return_in_try_finally(x):
    # the finally body runs after the return value is computed
    try:
        return x + 1
    finally:
        x.mul_(2)


def try_in_with(x):
    with torch.no_grad():
        try:
            y = x * 3
        finally:
            y = y + 1
    return y


def helper_with_try(x):
    try:
        return x.exp()
    except RuntimeError:
        return x


class TryModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def safe(self, x):
        try:
            y = self.lin(x)
        finally:
            y = y.relu()
        return y

    def forward(self, x):
        return self.safe(x) + helper_with_try(x)


@pytest.mark.parametrize("fn,make", [
    (try_except_else_finally, lambda: (r(3, 4),)),
    (nested_tries, lambda: (r(5),)),
    (try_in_loop, lambda: (r(2, 3), 4)),
    (try_around_comprehension, lambda: (r(3), 4)),
    (return_in_try_finally, lambda: (r(4),)),
    (try_in_with, lambda: (r(4),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_try_without_raise_is_traced_through(fn, make):
    check(fn, make)


def test_try_in_inlined_method_and_function():
    torch.manual_seed(0)
    m = TryModule().eval()
    check(m, lambda: (r(3, 5),))


# ---------------------------------------------------------------- exceptions raised and caught in the trace


class Config:
    def __init__(self, scale):
        self.scale = scale

    def __eq__(self, other):  # inputs are compared after the call
        return type(other) is Config and vars(self) == vars(other)


def missing_attribute_caught(x, cfg):
    try:
        s = cfg.missing_scale
    except AttributeError:
        s = cfg.scale
    return x * s


def missing_attribute_bound(x, cfg):
    try:
        s = cfg.other
    except AttributeError as e:  # noqa: F841  (bound, then deleted by the handler's cleanup)
        s = 3.0
    return x * s


def test_missing_attribute_is_caught():
    check(missing_attribute_caught, lambda: (r(4), Config(2.0)))
    check(missing_attribute_bound, lambda: (r(4), Config(2.0)))


def test_caught_attribute_error_is_guarded():
    """The attribute found missing at trace time is guarded: once it is set,
    the next call takes the other path, as eager does."""
    pt2.reset()
    f = pt2.compile(missing_attribute_caught)
    cfg, x = Config(2.0), r(4)
    with torch.no_grad():
        compare(f(x, cfg), missing_attribute_caught(x, cfg), 1e-6)
        cfg.missing_scale = 5.0
        compare(f(x, cfg), missing_attribute_caught(x, cfg), 1e-6)


def missing_key_caught(x, d):
    try:
        w = d["w"]
    except KeyError:
        w = 1.5
    return x * w


def test_missing_key_is_caught():
    check(missing_key_caught, lambda: (r(4), {"v": 2.0}))
    check(missing_key_caught, lambda: (r(4), {"w": 3.0}))
    # a dict passed in that gains the key later: the guard sends it down the other path
    pt2.reset()
    f = pt2.compile(missing_key_caught)
    d, x = {"v": 2.0}, r(4)
    with torch.no_grad():
        compare(f(x, d), missing_key_caught(x, d), 1e-6)
        d["w"] = 4.0
        compare(f(x, d), missing_key_caught(x, d), 1e-6)


class WithMissing(dict):
    def __missing__(self, key):
        return 0.5


class Record(collections.OrderedDict):
    pass


def test_missing_key_of_dict_subclasses():
    """A dict subclass read from outside: KeyError where it is sure (guarded
    missing); __missing__ (dict's __getitem__ calls it) is a break."""
    check(missing_key_caught, lambda: (r(4), Record(v=2.0)))
    run_both(missing_key_caught, lambda: (r(4), WithMissing(v=2.0)))
    run_both(missing_key_caught, lambda: (r(4), collections.defaultdict(lambda: 0.25, v=2.0)))


def sum_present_keys(x, d, keys):
    out = x
    for k in keys:
        try:
            out = out + d[k]
        except KeyError:
            continue
    return out


def test_key_error_in_loop_with_continue():
    check(sum_present_keys, lambda: (r(3), {"a": 1.0, "c": 3.0}, ["a", "b", "c", "d"]))


def key_error_made_in_trace(x):
    d = {"a": x}
    try:
        return d["b"]
    except KeyError:
        return d["a"] * 2


def stop_iteration_caught(x):
    it = iter([x, x * 2])
    total = next(it)
    while True:
        try:
            total = total + next(it)
        except StopIteration:
            break
    return total


def explicit_raise_caught(x, n):
    try:
        if n > 2:
            raise ValueError(f"n={n} too large")
        y = x * n
    except (TypeError, ValueError):
        y = -x
    return y


def raise_class_caught(x):
    try:
        raise IndexError
    except LookupError:
        return x + 7


def _lookup(d, k):
    return d[k]


def _checked(x, limit):
    if x.shape[0] > limit:
        raise RuntimeError("too long")
    return x.sin()


def raised_in_inlined_calls(x, d):
    try:
        a = _lookup(d, "missing")
    except KeyError:
        a = 0.25
    try:
        b = _checked(x, 2)
    except RuntimeError:
        b = x.cos()
    return a * b


class RaisingLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def pick(self, name):
        return getattr(self, name)

    def forward(self, x):
        try:
            layer = self.pick("not_a_layer")
        except AttributeError:
            layer = self.lin
        return layer(x)


@pytest.mark.parametrize("fn,make", [
    (key_error_made_in_trace, lambda: (r(4),)),
    (stop_iteration_caught, lambda: (r(4),)),
    (explicit_raise_caught, lambda: (r(4), 3)),
    (explicit_raise_caught, lambda: (r(4), 1)),
    (raise_class_caught, lambda: (r(2, 2),)),
    (raised_in_inlined_calls, lambda: (r(4), {})),
], ids=lambda v: getattr(v, "__name__", ""))
def test_exception_caught_in_trace(fn, make):
    check(fn, make)


def test_exception_caught_in_module_forward():
    torch.manual_seed(0)
    check(RaisingLayer().eval(), lambda: (r(3, 4),))


def inner_handler_misses(x):
    try:
        try:
            raise KeyError("k")
        except ValueError:
            x = x * 100
        finally:
            x = x + 1
    except LookupError:
        x = x * 2
    return x


def reraise_to_outer(x):
    try:
        try:
            {}["missing"]
        except KeyError:
            x = x + 1
            raise
    except KeyError:
        x = x * 3
    return x


def raise_from_in_handler(x):
    try:
        try:
            x.no_such_method()
        except AttributeError as e:
            raise ValueError("wrapped") from e
    except ValueError:
        x = x - 1
    return x


def handler_checks_type(x):
    try:
        [][1]
    except Exception as e:
        x = x * (2 if isinstance(e, IndexError) else 5)
    return x


def exception_through_with(x):
    # the with block's __exit__ restores the grad mode on the exception path
    try:
        with torch.enable_grad():
            raise ValueError("inside")
    except ValueError:
        pass
    return x * (2 if torch.is_grad_enabled() else 3)


@pytest.mark.parametrize("fn", [inner_handler_misses, reraise_to_outer, raise_from_in_handler, handler_checks_type,
                                exception_through_with], ids=lambda f: f.__name__)
def test_handler_flow(fn):
    check(fn, lambda: (r(3),))


class PlainError(Exception):
    pass


class DetailedError(ValueError):
    def __init__(self, what):
        super().__init__(f"detail: {what}")
        self.what = what


def user_exception_caught(x):
    try:
        raise PlainError("plain")
    except PlainError:
        x = x + 1
    return x


def user_exception_with_init(x):
    try:
        raise DetailedError("d")
    except ValueError:
        x = x * 2
    return x


def test_user_exception_classes():
    check(user_exception_caught, lambda: (r(3),))
    # a Python __init__ would run at trace time: a clean break, the right result
    run_both(user_exception_with_init, lambda: (r(3),))


class Stub:
    """As torch's stand-ins for CUDA classes on a CPU build: __new__ raises."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError(f"Tried to instantiate dummy base class {cls.__name__}")


def stream_capturing():
    try:
        return Stub()
    except Exception:
        return False


def guarded_by_stub(x):
    if stream_capturing():
        return x
    return x + 1


def test_python_new_that_raises_is_caught():
    """transformers' is_tracing() asks torch.cuda.is_current_stream_capturing()
    inside try/except Exception, which raises from such a __new__ on a CPU
    build: the except clause is traced, no break."""
    check(guarded_by_stub, lambda: (r(4),))


class WithGetattr:
    def __init__(self):
        self.base = 2.0

    @property
    def derived(self):
        return self.missing_field * 2  # AttributeError: CPython calls __getattr__

    def __getattr__(self, name):
        return 10.0

    def __eq__(self, other):
        return type(other) is WithGetattr and vars(self) == vars(other)


def property_error_goes_to_getattr(x, o):
    try:
        v = o.derived
    except AttributeError:
        v = -1.0
    return x * v


def test_property_attribute_error_goes_to_getattr():
    run_both(property_error_goes_to_getattr, lambda: (r(3), WithGetattr()))


def test_caught_exceptions_under_fullgraph():
    pt2.reset()
    f = pt2.compile(raised_in_inlined_calls, fullgraph=True)
    x = r(4)
    with torch.no_grad():
        compare(f(x, {}), raised_in_inlined_calls(x, {}), 1e-6)
