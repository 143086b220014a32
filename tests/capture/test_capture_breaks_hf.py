"""Constructs that split HuggingFace GPT-2 and T5 into several graphs, each compared with eager:
lists of ints and several tensors as tensor indices, `in` on a tensor (a named data-dependent break), ContextVar.reset
with a Token from outside the trace (a continuation's), mutable default arguments, and
copy.copy / copy.deepcopy."""
import contextvars
import copy

import pytest
import torch

import pt2
from test_capture import compare, r


def counts(fn, *args):
    with torch.no_grad():
        e = pt2.explain(fn)(*args)
    return e.graph_count, e.graph_break_count, [str(b) for b in e.break_reasons]


def check(fn, make_inputs, graphs=None, breaks=None, tol=1e-6):
    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(2):
        with torch.no_grad():
            ref = fn(*make_inputs())
            out = compiled(*make_inputs())
        compare(out, ref, tol)
    if graphs is not None:
        g, b, why = counts(fn, *make_inputs())
        assert (g, b) == (graphs, breaks), why


# ---------------------------------------------------------------- lists of ints as indices

DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool]


def inputs(shape, dtype, transposed=False):
    def make():
        x = r(*shape, dtype=dtype)
        return (x.transpose(0, 1) if transposed else x,)

    return make


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,transposed", [((2, 7), False), ((5, 3, 4), False), ((6, 3, 5), True)])
def test_list_index_last_dim_pair(dtype, shape, transposed):
    # transformers' warn_if_padding_and_no_attention_mask: input_ids[:, [-1, 0]]
    check(lambda x: x[:, [-1, 0]], inputs(shape, dtype, transposed), graphs=1, breaks=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize(
    "index",
    [
        lambda x: x[[2, 0, 2, -1]],  # repeats and negatives, first dim
        lambda x: x[..., [1, 0]],  # after an Ellipsis
        lambda x: x[None, :, [2]],  # after None
        lambda x: x[1:, [[0, 1], [2, -1]]],  # a 2-d index list after a slice
        lambda x: x[:, (1, 0)] * 2,  # a tuple inside the index tuple is a sequence index too
        lambda x: x[[0, 1]][:, 1:],
    ],
)
def test_list_index_forms(dtype, index):
    check(index, inputs((4, 3, 5), dtype), graphs=1, breaks=0)


@pytest.mark.parametrize(
    "index",
    [
        lambda x: x[0, :, [1, 2]],  # an int is a select first: the list's dim stays in place
        lambda x: x[[0, 1], [1, 2]],  # two advanced indices
        lambda x: x[[0, 1], :, [0, -1]],  # apart: the index dim leads
        lambda x: x[[[0], [3]], [1, 2, -1]],  # lists that broadcast
    ],
)
def test_list_index_with_other_indices(index):
    check(index, inputs((4, 3, 5), torch.float32), graphs=1, breaks=0)


def test_list_of_bools_is_a_mask_break():
    check(lambda x: x[[True, False, True, False]], inputs((4, 3, 5), torch.float32))


def test_list_index_out_of_range_raises_as_eager():
    def fn(x):
        return x[:, [0, 9]]

    with pytest.raises(IndexError):
        fn(r(2, 3))
    with pytest.raises(IndexError):
        pt2.compile(fn)(r(2, 3))


# ---------------------------------------------------------------- several index tensors
# PyTorch applies an index's ints, slices and None first, then its index tensors together
# (aten.index): they broadcast against each other, and the broadcast dims replace the indexed
# dims when those are adjacent, or lead the result when a slice or None lies between them.
# A 0-d index tensor is an int (a select).  x is [5, 6, 7]; i0, i1, i2 index dims 0, 1, 2.


def index_inputs(dtype=torch.float32, transposed=False, index_dtypes=(torch.int64,) * 3, seed=0):
    def make():
        g = torch.Generator().manual_seed(seed)
        x = r(7, 6, 5, dtype=dtype).permute(2, 1, 0) if transposed else r(5, 6, 7, dtype=dtype)
        i0 = torch.randint(-5, 5, (3, 1), generator=g).to(index_dtypes[0])  # negatives wrap
        i1 = torch.randint(-6, 6, (4,), generator=g).to(index_dtypes[1])
        i2 = torch.randint(-7, 7, (4,), generator=g).to(index_dtypes[2])
        return x, i0, i1, i2

    return make


INDEX_FORMS = {
    "x[i0, i1]": lambda x, i0, i1, i2: x[i0, i1],
    "x[:, i1, i2]": lambda x, i0, i1, i2: x[:, i1, i2],
    "x[i0, :, i2]": lambda x, i0, i1, i2: x[i0, :, i2],
    "x[i0, i1, i2]": lambda x, i0, i1, i2: x[i0, i1, i2],
    "x[..., i1, i2]": lambda x, i0, i1, i2: x[..., i1, i2],
    "x[i0, ..., i2]": lambda x, i0, i1, i2: x[i0, ..., i2],
    "x[i0, None, i1]": lambda x, i0, i1, i2: x[i0, None, i1],
    "x[None, i0, i1]": lambda x, i0, i1, i2: x[None, i0, i1],
    "x[i0, 1:5:2, i2]": lambda x, i0, i1, i2: x[i0, 1:5:2, i2],
    "x[i0, -2, i2]": lambda x, i0, i1, i2: x[i0, -2, i2],  # the int selects first: i0, i2 adjacent
    "x[3, i1, i2]": lambda x, i0, i1, i2: x[3, i1, i2],
    "x[1, :, i2]": lambda x, i0, i1, i2: x[1, :, i2],
    "x[i0[2, 0], :, i2]": lambda x, i0, i1, i2: x[i0[2, 0], :, i2],  # a 0-d tensor is a select
    "x[i0[:, 0], i1[:3]]": lambda x, i0, i1, i2: x[i0[:, 0], i1[:3]],
    "x[[0, -1, 2, 4], i1]": lambda x, i0, i1, i2: x[[0, -1, 2, 4], i1],  # a list among tensors
    "x[i0, i1] * 2 + 1": lambda x, i0, i1, i2: x[i0, i1] * 2 + 1,
    "x[i0, i1] of x + 1": lambda x, i0, i1, i2: (x + 1)[i0, i1],
    "x[:, i1][i0, :, i2]": lambda x, i0, i1, i2: x[:, i1][i0[:, 0], :, i2[:3]],
    "x.transpose(0, 2)[i2, i1]": lambda x, i0, i1, i2: x.transpose(0, 2)[i2, i1],
}


@pytest.mark.parametrize("form", list(INDEX_FORMS), ids=list(INDEX_FORMS))
def test_several_index_tensors(form):
    check(INDEX_FORMS[form], index_inputs(), graphs=1, breaks=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("form", ["x[i0, i1]", "x[i0, :, i2]", "x[:, i1, i2]", "x[i0, i1, i2]"])
def test_several_index_tensors_dtypes(dtype, transposed, form):
    check(INDEX_FORMS[form], index_inputs(dtype, transposed), graphs=1, breaks=0)


@pytest.mark.parametrize("index_dtypes", [(torch.int32,) * 3, (torch.int32, torch.int64, torch.int32)], ids=["int32", "mixed"])
@pytest.mark.parametrize("form", ["x[i0, i1]", "x[i0, :, i2]", "x[i0, i1, i2]"])
def test_several_index_tensors_int32(index_dtypes, form):
    check(INDEX_FORMS[form], index_inputs(index_dtypes=index_dtypes), graphs=1, breaks=0)


def test_pooled_logits_of_the_last_token():
    # GPT2ForSequenceClassification: logits[arange(batch), last non-pad token]
    def pooled(logits, input_ids):
        non_pad_mask = (input_ids != 0).to(logits.device, torch.int32)
        token_indices = torch.arange(input_ids.shape[-1], device=logits.device, dtype=torch.int32)
        last_non_pad_token = (token_indices * non_pad_mask).argmax(-1)
        return logits[torch.arange(input_ids.shape[0], device=logits.device), last_non_pad_token]

    check(pooled, lambda: (r(3, 9, 5), r(3, 9, dtype=torch.int64, lo=0, hi=4)), graphs=1, breaks=0)


def test_index_tensors_that_do_not_broadcast_raise_as_eager():
    def fn(x, i0, i1, i2):
        return x[i0[:, 0], i1[:2]]

    for f in (fn, pt2.compile(fn)):
        with pytest.raises(IndexError):
            f(*index_inputs()())


def test_mask_among_index_tensors_is_a_named_break():
    def fn(x, i0, i1, i2):
        return x[x[:, 0, 0] > 0, :, i2[:1]]  # the result's shape depends on the data

    check(fn, index_inputs())
    _, breaks, why = counts(fn, *index_inputs()())
    assert breaks >= 1 and "boolean mask" in why[0], why


def test_float_index_tensor_raises_as_eager():
    def fn(x, i0, i1, i2):
        return x[i0, i1.float()]

    for f in (fn, pt2.compile(fn)):
        with pytest.raises(IndexError):
            f(*index_inputs()())


# ---------------------------------------------------------------- `in` on a tensor


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_in_tensor_is_a_named_break(dtype):
    def fn(x, pad):
        if pad in x[:, [-1, 0]]:
            return x + 1
        return x - 1

    for pad in (0, 1, 3):
        check(fn, lambda: (r(3, 6, dtype=dtype, lo=0, hi=2), pad))
    _, breaks, why = counts(fn, r(3, 6, dtype=dtype), 1)
    assert breaks >= 1 and "`in` on a tensor" in why[0], why


def test_in_tensor_of_a_string_raises_as_eager():
    def fn(x):
        return "a" in x

    with pytest.raises(RuntimeError, match="only supports Tensor or scalar"):
        fn(r(3))
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar"):
        pt2.compile(fn)(r(3))


# ---------------------------------------------------------------- ContextVar.reset of an outside Token

collector = contextvars.ContextVar("breaks_collector", default=None)
other = contextvars.ContextVar("breaks_other", default=None)


def reset_after_break(x):
    outs = []
    token = collector.set(outs)
    try:
        print("break", end="\r")  # the continuation gets `token` from outside its trace
        y = x.sin() + (collector.get() is outs)
    finally:
        collector.reset(token)
    return y, len(outs), collector.get()


def test_reset_of_a_continuations_token():
    check(reset_after_break, lambda: (r(4, 3),))
    assert collector.get() is None
    _, _, why = counts(reset_after_break, r(4, 3))
    assert not any("ContextVar" in w for w in why), why


def test_reset_of_token_from_outside_restores_old_value():
    def fn(x, tok):
        collector.reset(tok)
        return x * 2, collector.get()

    compiled = pt2.compile(fn)
    for old in (None, 5, "v"):
        base = collector.set(old)
        tok = collector.set([1])
        with torch.no_grad():
            out = compiled(r(3), tok)
        assert collector.get() == old and out[1] == old
        compare(out[0], r(3) * 2, 0)
        collector.reset(base)
    assert collector.get() is None
    assert counts(fn, r(3), collector.set(1))[:2] == (1, 0)
    collector.set(None)


def test_reset_of_token_of_a_var_without_value():
    var = contextvars.ContextVar("breaks_unset")

    def fn(x, tok):
        var.reset(tok)
        return x + 1, var.get("default")

    compiled = pt2.compile(fn)
    with torch.no_grad():
        out = compiled(r(3), var.set(1))
    assert out[1] == "default"
    with pytest.raises(LookupError):
        var.get()


def test_outside_token_used_twice_raises():
    def fn(x, tok):
        collector.reset(tok)
        collector.reset(tok)
        return x + 1

    with pytest.raises(RuntimeError):
        fn(r(3), collector.set(1))
    collector.set(None)
    with pytest.raises(RuntimeError):
        pt2.compile(fn)(r(3), collector.set(1))
    collector.set(None)


def test_outside_token_of_another_var_raises():
    def fn(x, tok):
        other.reset(tok)
        return x + 1

    with pytest.raises(ValueError):
        fn(r(3), collector.set(1))
    with pytest.raises(ValueError):
        pt2.compile(fn)(r(3), collector.set(1))
    collector.set(None)


def test_outside_token_already_used_raises_when_replayed():
    def fn(x, tok):
        collector.reset(tok)
        return x + 1

    compiled = pt2.compile(fn)
    tok = collector.set(1)
    with torch.no_grad():
        compiled(r(3), tok)  # compiles and uses the token
    with pytest.raises(RuntimeError, match="already been used"):
        compiled(r(3), tok)
    assert collector.get() is None


# ---------------------------------------------------------------- mutable default arguments


def appends(x, acc=[], *, scale={"a": 2.0}):  # noqa: B006 - the construct under test
    acc.append(len(acc))
    return x * scale["a"] + len(acc)


def uses_tensor_default(x, w=torch.linspace(-1, 1, 5)):  # noqa: B008
    return x * w


def test_list_default_is_changed_as_in_eager():
    def fn(x):
        return appends(x) + 1

    appends.__defaults__[0].clear()
    eager = [fn(r(5)) for _ in range(3)]
    eager_acc = list(appends.__defaults__[0])
    appends.__defaults__[0].clear()
    compiled = pt2.compile(fn)
    with torch.no_grad():
        got = [compiled(r(5)) for _ in range(3)]
    compare(got, eager, 1e-6)
    assert appends.__defaults__[0] == eager_acc
    assert counts(fn, r(5))[:2] == (1, 0)


def test_kwonly_dict_default_is_guarded():
    def fn(x):
        return appends(x)

    compiled = pt2.compile(fn)
    with torch.no_grad():
        compare(compiled(r(5)), fn(r(5)) - 1, 1e-6)  # eager appended once more
        appends.__kwdefaults__["scale"]["a"] = 3.0
        try:
            compare(compiled(r(5)), fn(r(5)) - 1, 1e-6)
        finally:
            appends.__kwdefaults__["scale"]["a"] = 2.0
    appends.__defaults__[0].clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tensor_default_is_a_graph_input(dtype):
    def fn(x):
        return uses_tensor_default(x).relu()

    check(fn, lambda: (r(3, 5, dtype=dtype),), graphs=1, breaks=0)
    old = uses_tensor_default.__defaults__
    uses_tensor_default.__defaults__ = (torch.full((5,), 2.0),)
    try:
        check(fn, lambda: (r(2, 5),))
    finally:
        uses_tensor_default.__defaults__ = old


# ---------------------------------------------------------------- copy.copy / copy.deepcopy


class Config:
    def __init__(self, n):
        self.n = n
        self.labels = {0: "a", 1: "b"}
        self.sizes = [n, 2 * n]
        self.name = "cfg"
        self.pair = (1, "x")


class Custom(Config):
    def __deepcopy__(self, memo):
        c = Config(self.n + 100)
        return c


def state(o):
    return type(o).__name__, dict(o.__dict__)


def test_deepcopy_of_an_object_from_outside():
    cfg = Config(3)

    def fn(x, c):
        d = copy.deepcopy(c)
        d.sizes.append(7)
        d.labels[2] = "c"
        d.n += 1
        return x * d.n + len(d.sizes), d

    with torch.no_grad():
        ref, d_ref = fn(r(4), Config(3))
        out, d_out = pt2.compile(fn)(r(4), cfg)
    compare(out, ref, 1e-6)
    assert state(d_out) == state(d_ref)
    assert state(cfg) == state(Config(3))  # the original is untouched
    assert d_out.pair is cfg.pair  # a tuple of constants is its own copy
    assert counts(fn, r(4), Config(3))[:2] == (1, 0)


def test_deepcopy_keeps_sharing_and_cycles():
    def fn(x, c):
        d = copy.deepcopy(c)
        d.sizes.append(1)
        return x + len(d.other), d.other is d.sizes, d.me is d, d

    def make():
        c = Config(2)
        c.other = c.sizes
        c.me = c
        return r(3), c

    pt2.reset()
    with torch.no_grad():
        a, b = fn(*make()), pt2.compile(fn)(*make())
    compare(a[:3], b[:3], 1e-6)
    assert b[3].me is b[3] and b[3].other is b[3].sizes


@pytest.mark.parametrize("deep", [False, True])
def test_copy_of_containers_from_outside(deep):
    cp = copy.deepcopy if deep else copy.copy

    def fn(x, lst, d):
        l2, d2 = cp(lst), cp(d)
        l2.append(5)
        l2[0].append(9)
        d2["k"] = 1
        return x + len(l2) + len(d2), l2, d2

    def make():
        return r(3), [[1], 2], {"a": [3], "b": (1, 2)}

    eager_in, pt2_in = make(), make()
    with torch.no_grad():
        ref = fn(*eager_in)
        out = pt2.compile(fn)(*pt2_in)
    compare(out, ref, 1e-6)
    compare(list(pt2_in[1:]), list(eager_in[1:]), 0)  # the originals: changed through a shallow copy only
    assert (out[1][0] is pt2_in[1][0]) == (not deep)
    assert counts(fn, *make())[:2] == (1, 0)


def test_copy_of_an_object_made_in_the_trace():
    def fn(x):
        c = Config(4)
        d = copy.deepcopy(c)
        d.sizes[0] = 0
        e = copy.copy(c)
        return x * c.sizes[0] + d.sizes[0] + (e.sizes is c.sizes), d

    check(lambda x: fn(x)[0], lambda: (r(2, 3),), graphs=1, breaks=0)
    with torch.no_grad():
        assert state(pt2.compile(fn)(r(2))[1]) == state(fn(r(2))[1])


def test_deepcopy_of_what_it_cannot_copy_is_a_clean_break():
    def fn(x, c):
        d = copy.deepcopy(c)
        return x + d.n

    for c in (Custom(1), [torch.ones(2)]):
        f = fn if isinstance(c, Config) else (lambda x, c: x + copy.deepcopy(c)[0])
        pt2.reset()
        with torch.no_grad():
            compare(pt2.compile(f)(r(2), c), f(r(2), c), 1e-6)
        _, breaks, why = counts(f, r(2), c)
        assert breaks >= 1 and "copy.deepcopy" in why[0], why


# ---------------------------------------------------------------- setattr / delattr builtins


def test_setattr_delattr_on_a_copy():
    # transformers' get_text_config renames attributes of a deep copy of the config
    def fn(x, c):
        d = copy.deepcopy(c)
        for key in list(d.__dict__):
            if key.startswith("si"):
                value = getattr(d, key)
                delattr(d, key)
                setattr(d, "new_" + key, value)
        return x * d.n + len(d.new_sizes), d, hasattr(d, "sizes")

    with torch.no_grad():
        ref = fn(r(3), Config(2))
        out = pt2.compile(fn)(r(3), Config(2))
    compare(out[0], ref[0], 1e-6)
    assert state(out[1]) == state(ref[1]) and out[2] is ref[2] is False
    assert counts(fn, r(3), Config(2))[:2] == (1, 0)


def test_setattr_on_an_object_from_outside_is_replayed():
    def fn(x, c):
        setattr(c, "n", c.n + 1)
        return x + c.n

    a, b = Config(1), Config(1)
    with torch.no_grad():
        compare(pt2.compile(fn)(r(3), a), fn(r(3), b), 0)
    assert a.n == b.n == 2


def test_delattr_cases_that_break_match_eager():
    def missing(x):
        c = Config(1)
        delattr(c, "nope")
        return x

    with pytest.raises(AttributeError):
        missing(r(2))
    with pytest.raises(AttributeError):
        pt2.compile(missing)(r(2))

    def outside(x, c):
        delattr(c, "n")
        return x + 1, hasattr(c, "n")

    a, b = Config(1), Config(1)
    with torch.no_grad():
        compare(pt2.compile(outside)(r(2), a), outside(r(2), b), 0)
    assert "n" not in a.__dict__
