"""pt2.disable: a function kept out of capture is a graph break where compiled code calls it,
runs in CPython (with nothing it calls captured, unless recursive=False), and gives eager's
results; compared with eager on two input sets, with graph/break counts."""
import torch

import pt2
from test_capture import r
from test_capture_objects import counts, run_both

CALLS = []


def helper_body(x):
    CALLS.append(1)
    return torch.sin(x) * 2


@pt2.disable
def kept_out(x):
    return helper_body(x) + 1


def uses_disabled(x, y):
    a = (x + y).relu()
    b = kept_out(a)
    return b * y - 1


def test_disabled_call_is_a_break():
    run_both(uses_disabled, lambda: (r(5, 7), r(5, 7)))
    run_both(uses_disabled, lambda: (r(3, 1, dtype=torch.float64), r(3, 4, dtype=torch.float64)))
    g, b, reasons = counts(uses_disabled, r(5, 7), r(5, 7))
    assert (g, b) == (2, 1), reasons
    assert "pt2.disable" in str(reasons[0])


def test_disabled_callee_not_captured():
    """recursive: helper_body, called inside the disabled function, never becomes a graph."""
    pt2.reset()
    f = pt2.compile(uses_disabled)
    x, y = r(4, 4), r(4, 4)
    with torch.no_grad():
        f(x, y)
        f(x, y)
    assert pt2._C.cache_size(helper_body.__code__) == 0
    assert pt2._C.cache_size(kept_out.__wrapped__.__code__) == 0


def only_this_frame(x):
    return helper_body(x) - 3


pt2.disable(only_this_frame, recursive=False)


def test_non_recursive_disable_compiles_callees():
    pt2.reset()
    f = pt2.compile(lambda x: only_this_frame(x * 2))
    x = r(6, 5)
    with torch.no_grad():
        torch.testing.assert_close(f(x), only_this_frame(x * 2))
        torch.testing.assert_close(f(x), only_this_frame(x * 2))
    assert pt2._C.cache_size(only_this_frame.__code__) == 0
    assert pt2._C.cache_size(helper_body.__code__) >= 1


def test_disabled_root_runs_eagerly():
    """pt2.compile of a disabled function runs it as is, even after pt2.reset()."""
    f = pt2.compile(kept_out)
    x = r(2, 3)
    for _ in range(2):
        pt2.reset()
        with torch.no_grad():
            torch.testing.assert_close(f(x), torch.sin(x) * 2 + 1)
    assert pt2._C.cache_size(helper_body.__code__) == 0


def test_disable_as_decorator_factory_and_methods():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @pt2.disable()
        def side(self, x):
            return x.cos()

        def forward(self, x):
            return self.side(self.lin(x)) + 1

    m = M().eval()
    run_both(m, lambda: (r(3, 4),))
    g, b, reasons = counts(m, r(3, 4))
    assert (g, b) == (2, 1), reasons


def test_disable_rejects_non_functions_without_recursion():
    import pytest

    with pytest.raises(TypeError):
        pt2.disable(torch.sin, recursive=False)
