"""nn.LSTM, nn.GRU and nn.RNN (tanh, relu) through capture: the weakref call of
RNNBase._weights_have_changed traced (its referent, guarded through the source `ref()`), the
torch._VF recurrences through their Python forms (pt2/_polyfills_rnn.py, unrolled over the sequence).
Each against eager in eval mode under no_grad, with one graph, no break, and a second call with new
values that reuses the entry; weights replaced between calls, and train mode with dropout (a break),
still give eager's results."""
import pytest
import torch
import torch.nn as nn

import pt2
from pt2 import _C

MODES = {"lstm": (nn.LSTM, {}), "gru": (nn.GRU, {}), "rnn_tanh": (nn.RNN, {}), "rnn_relu": (nn.RNN, {"nonlinearity": "relu"})}
IN, HID, SEQ, BATCH = 5, 11, 7, 3


def make(mode, dtype=torch.float32, seed=0, **kw):
    cls, extra = MODES[mode]
    torch.manual_seed(seed)
    return cls(IN, HID, dtype=dtype, **extra, **kw).eval()


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + 101 * len(shape) + sum(shape))
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def flat(out):
    """(output, h) or (output, (h, c)) as a list of tensors."""
    y, h = out
    return [y] + (list(h) if isinstance(h, tuple) else [h])


def close(got, want, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    got, want = flat(got), flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def hidden(mode, m, batch, dtype, seed):
    """A random hx of the module's shape ([L·D, B, H], or [L·D, H] unbatched)."""
    lead = (m.num_layers * (2 if m.bidirectional else 1),) + ((batch,) if batch else ())
    h = rand(*lead, m.proj_size or HID, dtype=dtype, seed=seed)
    return (h, rand(*lead, HID, dtype=dtype, seed=seed + 1)) if mode == "lstm" else h


def inputs(mode, m, dtype, seed, batched=True, given=True):
    shape = ((BATCH, SEQ) if m.batch_first else (SEQ, BATCH)) if batched else (SEQ,)
    x = rand(*shape, IN, dtype=dtype, seed=seed)
    return (x, hidden(mode, m, BATCH if batched else None, dtype, seed + 7)) if given else (x,)


def check(mode, m, dtype=torch.float32, batched=True, given=True):
    """One graph, no break, eager's values, and a second call with new values on the same entry."""
    with torch.no_grad():
        args = inputs(mode, m, dtype, 0, batched, given)
        want = m(*args)
        pt2.reset()
        info = pt2.explain(m)(*args)
        assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
        pt2.reset()
        f = pt2.compile(m)
        close(f(*args), want, dtype)
        args = inputs(mode, m, dtype, 1, batched, given)
        close(f(*args), m(*args), dtype)
        assert _C.cache_size(type(m).forward.__code__) == 1


# (batch_first, bidirectional, num_layers, bias, hx given, dtype): every option in both states, in few cases
CASES = [
    (False, False, 1, True, False, torch.float32),
    (True, True, 2, True, True, torch.float32),
    (False, True, 1, False, True, torch.float64),
    (True, False, 2, False, False, torch.float64),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "bf%d-bi%d-L%d-bias%d-hx%d-%s" % (*c[:5], str(c[5])[6:]))
@pytest.mark.parametrize("mode", list(MODES))
def test_rnn_matches_eager(mode, case):
    batch_first, bidirectional, layers, bias, given, dtype = case
    m = make(mode, dtype, batch_first=batch_first, bidirectional=bidirectional, num_layers=layers, bias=bias)
    check(mode, m, dtype, given=given)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("given", [False, True])
def test_unbatched_input(mode, given):
    check(mode, make(mode, bidirectional=True), batched=False, given=given)


def test_lstm_projection():
    check("lstm", make("lstm", proj_size=4, num_layers=2, bidirectional=True))
    check("lstm", make("lstm", proj_size=3), given=False)


@pytest.mark.parametrize("how", ["setattr", "parameters_dict"])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_weights_replaced_between_calls(mode, how):
    """A weight replaced after the first call: `ref() is weight` (an alias guard through the weakref)
    fails, and the new trace or the eager fallback gives eager's new result."""
    m = make(mode, num_layers=2)
    x = rand(SEQ, BATCH, IN)
    with torch.no_grad():
        pt2.reset()
        f = pt2.compile(m)
        close(f(x), m(x), torch.float32)
        new = nn.Parameter(rand(*m.weight_hh_l0.shape, seed=5))
        if how == "setattr":
            m.weight_hh_l0 = new
        else:  # past RNNBase.__setattr__: _flat_weights is stale until _weights_have_changed sees it
            m._parameters["weight_hh_l0"] = new
        got = f(x)
        want = m(x)
        close(got, want, torch.float32)
        close(f(x), want, torch.float32)
        ref = make(mode, num_layers=2)
        ref.weight_hh_l0 = nn.Parameter(new.detach().clone())
        close(got, ref(x), torch.float32)  # the new weight is used, not only "the same as m"


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_train_mode_with_dropout_stays_correct(mode):
    """Dropout between layers in training: the C op is kept (a break); eager's values with the same seed."""
    m = make(mode, num_layers=2, dropout=0.5).train()
    x = rand(SEQ, BATCH, IN)
    with torch.no_grad():
        torch.manual_seed(3)
        want = m(x)
        pt2.reset()
        torch.manual_seed(3)
        got = pt2.compile(m)(x)
    close(got, want, torch.float32)


class _Holder:
    pass


def test_weakref_call_guards_its_referent():
    """ref() in a trace is the referent now, guarded through the source `ref()`: a referent whose
    attribute changes, or that dies (None), is seen by the next call."""
    import gc
    import weakref

    def f(x, r):
        o = r()
        if o is None:
            return x - 1
        return x * o.k

    a = _Holder()
    a.k = 2.0
    r = weakref.ref(a)
    x = torch.arange(4.0)
    pt2.reset()
    info = pt2.explain(f)(x, r)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
    assert any("L['r']()" in str(g) for g in info.out_guards)
    pt2.reset()
    g = pt2.compile(f)
    torch.testing.assert_close(g(x, r), x * 2)
    a.k = 3.0
    torch.testing.assert_close(g(x, r), x * 3)
    del a
    gc.collect()
    assert r() is None
    torch.testing.assert_close(g(x, r), x - 1)


def _explain_and_run(m, *args):
    with torch.no_grad():
        want = m(*args)
        pt2.reset()
        info = pt2.explain(m)(*args)
        pt2.reset()
        got = pt2.compile(m)(*args)
    return info, got, want


def test_packed_sequence_stays_the_c_op():
    """A PackedSequence input breaks (today already at unpacking it in RNNBase.forward; polyfills.c
    declines the PackedSequence overload of the _VF ops too): eager's values."""
    from torch.nn.utils.rnn import pack_padded_sequence

    for mode in ("lstm", "gru"):
        m = make(mode)
        x = pack_padded_sequence(rand(SEQ, BATCH, IN), torch.tensor([7, 5, 2]))
        info, got, want = _explain_and_run(m, x)
        assert info.graph_break_count >= 1
        torch.testing.assert_close(got[0].data, want[0].data)
        for g, w in zip(flat((None, got[1]))[1:], flat((None, want[1]))[1:]):
            torch.testing.assert_close(g, w)


def test_long_and_empty_sequences_stay_the_c_op():
    """Past 128 unrolled cells (steps × layers × directions) the C op is kept (the compile time grows
    faster than the graph): its kernel in the graph (pt2.aten); an empty sequence raises eager's error."""
    m = nn.RNN(2, 3, bidirectional=True).eval()
    info, got, want = _explain_and_run(m, rand(65, 2, 2))
    assert info.graph_break_count == 0, info.break_reasons
    close(got, want, torch.float32)
    with torch.no_grad(), pytest.raises(RuntimeError, match="sequence length"):
        pt2.compile(m)(rand(0, 2, 2))
    info, got, want = _explain_and_run(m, rand(64, 2, 2))
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
    close(got, want, torch.float32)
