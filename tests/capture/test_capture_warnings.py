"""warnings.warn inside compiled code (capture/warns.c): recorded at trace time and replayed after the
graph at every call as warnings.warn_explicit at the place eager's warning names, so that the filters
see eager's warnings: the same message, category, file and line, once per place under "default",
every call under "always", an exception under "error".  What it cannot name stays a break."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import pt2


def _explain(fn, *args):
    """pt2.explain's (graphs, breaks, reasons), its own call's warnings ignored."""
    pt2.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = pt2.explain(fn)(*args)
    return info.graph_count, info.graph_break_count, info.break_reasons


def _record(fn, *args, calls=1, action="always"):
    """(results, [(category, message, filename, lineno)]) of `calls` calls of fn under `action`."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter(action)
        out = [fn(*args) for _ in range(calls)]
    return out, [(x.category, str(x.message), x.filename, x.lineno) for x in w]


def plain(x):
    warnings.warn("plain: deprecated")
    return x * 2 + 1


def helper(x):
    warnings.warn("helper: use the other one", DeprecationWarning, stacklevel=2)
    return x.relu()


def calls_helper(x):
    y = helper(x)  # the warning names this line (stacklevel=2)
    return y - 1


def categorized(x):
    warnings.warn(message="categorized", category=FutureWarning)
    return x.sum(0)


@pytest.mark.parametrize("fn", [plain, calls_helper, categorized], ids=lambda f: f.__name__)
def test_warn_replayed_as_eager(fn):
    x = torch.randn(4, 5)
    graphs, breaks, why = _explain(fn, x)
    assert (graphs, breaks) == (1, 0), why
    want, eager = _record(fn, x, calls=3)
    got, compiled = _record(pt2.compile(fn), x, calls=3)
    assert compiled == eager and len(eager) == 3
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_warn_filters():
    x = torch.randn(3)
    pt2.reset()
    f = pt2.compile(plain)
    _, once = _record(f, x, calls=4, action="default")  # once per place, through the module's registry
    assert len(once) == 1
    _, none = _record(f, x, calls=2, action="ignore")
    assert none == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="plain: deprecated"):
            f(x)


def test_kl_div_mean_warns_without_a_break():
    x, t = torch.randn(4, 6).log_softmax(-1), torch.rand(4, 6)
    fn = lambda x, t: F.kl_div(x, t)  # noqa: E731  reduction="mean" warns
    graphs, breaks, why = _explain(fn, x, t)
    assert (graphs, breaks) == (1, 0), why
    want, eager = _record(fn, x, t, calls=2)
    got, compiled = _record(pt2.compile(fn), x, t, calls=2)
    assert compiled == eager and len(eager) == 2
    torch.testing.assert_close(got[0], want[0])


def past_the_function(x):
    warnings.warn("names the caller", stacklevel=2)
    return x + 1


def warn_then_break(x):
    y = x * 3
    warnings.warn("before the break")
    print("a break", end="\r")
    return y + 1


def test_what_stays_a_break():
    x = torch.randn(5)
    # a place outside the compiled function (the caller's line): torch's own warnings.warn runs it
    _, breaks, why = _explain(past_the_function, x)
    assert breaks == 1 and "stacklevel" in str(why[0])
    want, eager = _record(past_the_function, x, calls=2)
    got, compiled = _record(pt2.compile(past_the_function), x, calls=2)
    assert [w[:2] for w in compiled] == [w[:2] for w in eager] and len(eager) == 2
    torch.testing.assert_close(got[0], want[0])
    # a warning before a break: replayed after the graph before it, once a call
    pt2.reset()
    want, eager = _record(warn_then_break, x, calls=2)
    got, compiled = _record(pt2.compile(warn_then_break), x, calls=2)
    assert compiled == eager and len(eager) == 2
    torch.testing.assert_close(got[1], want[1])


# F.softmax / F.log_softmax without dim: eager's implicit dim (0 for 0, 1 and 3 dims, else 1) and its
# deprecation warning at the caller's line (capture/rules.c, softmax_of); torch.softmax without dim raises
# TypeError as eager does (a break); nn.Softmax() names a frame of Module.__call__ (a break, eager's result)
def implicit_softmax(x):
    return F.softmax(x) * 2


def implicit_log_softmax(x):
    return F.log_softmax(x) + 1


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("fn", [implicit_softmax, implicit_log_softmax], ids=lambda f: f.__name__)
def test_softmax_without_dim(fn, shape):
    x = torch.randn(*shape)
    graphs, breaks, why = _explain(fn, x)
    assert (graphs, breaks) == (1, 0), why
    want, eager = _record(fn, x, calls=2)
    got, compiled = _record(pt2.compile(fn), x, calls=2)
    assert compiled == eager and len(eager) == 2
    torch.testing.assert_close(got[0], want[0])


def test_softmax_without_dim_that_stays_a_break():
    x = torch.randn(3, 4)
    pt2.reset()
    with pytest.raises(TypeError):
        pt2.compile(lambda x: torch.softmax(x))(x)
    m = torch.nn.Softmax()
    _, breaks, _ = _explain(m, x)
    assert breaks == 1
    want, eager = _record(m, x)
    got, compiled = _record(pt2.compile(m), x)
    assert [w[:2] for w in compiled] == [w[:2] for w in eager] and len(eager) == 1
    torch.testing.assert_close(got[0], want[0])


def test_warning_turned_into_an_error_raises_at_the_call():
    """Under an "error" filter warnings.warn raises where eager's does: before the function's later
    side effects (an in-place add, a list append), and inside a `try` around it that catches it.
    The filters are a guard: the same function compiled under the default filters replays the
    warning after the graph, and under "error" breaks at the call."""
    import warnings

    def side_effects(x, log):
        warnings.warn("careful")
        x.add_(1)
        log.append(1)
        return x * 2

    def caught(x):
        try:
            warnings.warn("boom")
        except UserWarning:
            return x * 3
        return x * 2

    pt2.reset()
    compiled = pt2.compile(side_effects)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(torch.ones(2), [])  # compiled under a filter that does not raise
    for fn in (side_effects, compiled):
        x, log = torch.ones(2), []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="careful"):
                fn(x, log)
        assert torch.equal(x, torch.ones(2)) and log == []
    compiled = pt2.compile(caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 3.0))
