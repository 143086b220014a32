"""pt2.compile on many small programs, each compared with eager on two input
sets (the second changes a shape or dtype to exercise guards and recompiles),
with graph and break counts checked through pt2.explain."""
import dataclasses
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2
from eager_check import same_aliasing, views_only

CASES = []


def case(*input_sets, graphs=1, breaks=0, tol=1e-5):
    """Registers fn with input sets (callables returning args tuples)."""

    def deco(fn):
        CASES.append(pytest.param(fn, input_sets, graphs, breaks, tol, id=fn.__name__))
        return fn

    return deco


def r(*shape, dtype=torch.float32, seed=0, lo=-2.0, hi=2.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    return torch.randint(int(lo), int(hi) + 1, shape, generator=g).to(dtype)


def A(*shape, **kw):
    return lambda: (r(*shape, **kw),)


def AB(sa, sb, **kw):
    return lambda: (r(*sa, **kw), r(*sb, seed=7, **kw))


def compare(out, ref, tol, path="out"):
    assert type(out) is type(ref), f"{path}: type {type(out).__name__} != eager's {type(ref).__name__}"
    if isinstance(ref, torch.Tensor):
        assert out.dtype == ref.dtype, f"{path}: dtype {out.dtype} != {ref.dtype}"
        assert out.shape == ref.shape, f"{path}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        if ref.dtype.is_floating_point:
            torch.testing.assert_close(out, ref, rtol=tol, atol=tol, equal_nan=True)
        else:
            assert torch.equal(out, ref), f"{path}: values differ"
    elif isinstance(ref, (tuple, list)):
        assert len(out) == len(ref), f"{path}: length {len(out)} != {len(ref)}"
        for i, (o, e) in enumerate(zip(out, ref)):
            compare(o, e, tol, f"{path}[{i}]")
    elif isinstance(ref, dict):
        assert out.keys() == ref.keys()
        for k in ref:
            compare(out[k], ref[k], tol, f"{path}[{k!r}]")
    else:
        assert out == ref, f"{path}: {out!r} != {ref!r}"


# ---------------------------------------------------------------- arithmetic


@case(AB((4, 8), (8,)), AB((3, 5), (5,)))
def add_relu(x, y):
    return torch.relu(x + y)


@case(AB((4, 8), (4, 8)), AB((2, 3), (2, 3), dtype=torch.float64))
def operators(x, y):
    return x * y - x / (y.abs() + 1) + 2 ** 2 * x, -x, +y


@case(AB((5,), (5,)), AB((7,), (7,)))
def comparisons(x, y):
    return x < y, x <= y, x == y, x != y, x > 0.5, x >= y


@case(AB((6,), (6,), dtype=torch.int64, lo=1, hi=9), AB((3,), (3,), dtype=torch.int32, lo=1, hi=9))
def integer_ops(x, y):
    return x + y, x * 3, x // y, x % y, x - 1


@case(A(4, 4), A(2, 6))
def python_number_math(x):
    s = 2.0 * 3 + 1
    k = int(s) // 2
    return x * s + k, x - math.sqrt(4.0)


@case(A(3, 4), A(5, 2))
def chained_methods(x):
    return x.exp().log1p().sigmoid().tanh().mul(2).add(1).sub(0.5).div(3)


@case(A(10), A(3))
def pow_and_sqrt(x):
    return x.abs() ** 0.5, torch.pow(x, 2), x.pow(3), torch.sqrt(x.abs() + 1)


@case(AB((4, 4), (4, 4), dtype=torch.bool), AB((2,), (2,), dtype=torch.bool))
def boolean_ops(a, b):
    return a & b, a | b, a ^ b, ~a, torch.logical_not(b)


@case(A(8), A(8, dtype=torch.float64))
def clamp_forms(x):
    return x.clamp(-1, 1), torch.clamp(x, min=0.0), x.clamp(max=0.5), F.hardtanh(x), F.relu6(x * 4)


@case(AB((4, 5), (4, 5)), AB((3, 1), (1, 3)))
def where_and_max(x, y):
    return torch.where(x > y, x, y), torch.maximum(x, y), torch.minimum(x, y), torch.max(x, y)


@case(A(2, 3), A(4, 5, dtype=torch.float16), tol=1e-2)
def dtype_conversions(x):
    return x.float(), x.double(), x.half(), x.to(torch.float32), x.to(dtype=torch.float64), x.long(), (x > 0).int()


# ---------------------------------------------------------------- activations


@case(A(4, 16), A(3, 7))
def activations(x):
    return F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.softplus(x), F.elu(x), F.leaky_relu(x, 0.1), F.hardswish(x)


@case(A(4, 16), A(2, 9))
def sigmoid_tanh(x):
    return torch.sigmoid(x) * torch.tanh(x) + F.sigmoid(x)


# ---------------------------------------------------------------- reductions


@case(A(4, 8), A(3, 5))
def reductions(x):
    return x.sum(), x.sum(dim=1), x.mean(0, keepdim=True), x.amax(-1), x.amin(dim=(0, 1)), x.prod(1)


@case(A(4, 8), A(6, 2))
def var_std(x):
    return x.var(), x.var(dim=1), x.std(0, keepdim=True), torch.var(x, dim=1, unbiased=False), x.std(dim=1, correction=0)


@case(A(4, 8), A(5, 3))
def argmax_max(x):
    v, i = torch.max(x, dim=1)
    return x.argmax(), x.argmin(dim=0), v, i, x.max(), torch.min(x, 0, keepdim=True)[0]


@case(A(4, 8), A(3, 3))
def softmaxes(x):
    return x.softmax(-1), F.softmax(x, dim=0), F.log_softmax(x, dim=1), torch.softmax(x, 1, dtype=torch.float64)


@case(A(2, 8), A(5, 4))
def any_all(x):
    return (x > 0).any(), (x > 0).all(dim=1), torch.any(x > 1, dim=0)


# ---------------------------------------------------------------- shapes


@case(A(2, 3, 4), A(4, 3, 2))
def views(x):
    a, b, c = x.shape
    return x.view(a, b * c), x.reshape(-1), x.view(a * b, c).t(), x.flatten(1), torch.flatten(x)


@case(A(2, 3, 4), A(1, 5, 2))
def permutes(x):
    return x.permute(2, 0, 1), x.transpose(0, 2), x.transpose(-1, -2), torch.permute(x, (1, 2, 0)), x.mT, x.permute(2, 1, 0).contiguous()


@case(A(3, 1, 4), A(2, 1, 1))
def squeezes(x):
    return x.squeeze(), x.squeeze(1), x.unsqueeze(0), x.unsqueeze(-1), torch.unsqueeze(x, 2), x[None], x[:, None]


@case(A(6, 8), A(9, 5))
def slicing(x):
    return x[1:4], x[:, ::2], x[-2:], x[0], x[-1, 1:3], x[..., 0], x[1:5:2, :-1], x.narrow(0, 1, 2)


@case(A(4, 6), A(3, 6))
def cat_stack(x):
    return torch.cat([x, x * 2], dim=0), torch.cat((x, x, x), 1), torch.stack([x, x + 1]), torch.stack((x, x), dim=-1)


@case(A(6, 8), A(7, 3))
def split_chunk(x):
    a, b = x.chunk(2)
    parts = torch.split(x, 2, dim=1)
    return a + 1, b, parts[0], len(parts), x.split([1, x.shape[0] - 1])[1]


@case(A(2, 3), A(3, 1))
def expand_repeat(x):
    return x.expand(4, -1, -1), x.repeat(2, 3), x.unsqueeze(0).expand_as(torch.zeros(5, *x.shape)), x.flip(0), torch.flip(x, [0, 1])


@case(lambda: (r(5, 4), torch.tensor([0, 3, 1])), lambda: (r(6, 2), torch.tensor([5, 0])))
def index_with_tensor(x, idx):
    return x[idx], torch.index_select(x, 1, idx.clamp(max=1)), x.index_select(0, idx)


@case(lambda: (r(10, 4), torch.tensor([[1, 2], [3, 9]])), lambda: (r(4, 3), torch.tensor([0, 3, 3])))
def embedding_lookup(w, idx):
    return F.embedding(idx, w)


@case(A(2, 3, 4), A(1, 2, 2))
def pad_ops(x):
    return F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=-1.0)


# ---------------------------------------------------------------- linear algebra


@case(AB((4, 8), (8, 3)), AB((2, 5), (5, 7)), tol=1e-4)
def matmuls(a, b):
    return a @ b, torch.matmul(a, b), torch.mm(a, b), a.matmul(b)


@case(AB((3, 4, 5), (3, 5, 2)), AB((2, 2, 3), (2, 3, 3)), tol=1e-4)
def batched(a, b):
    return torch.bmm(a, b), a @ b, torch.einsum("bij,bjk->bik", a, b), torch.baddbmm(torch.ones(1), a, b, alpha=0.5)


@case(AB((4, 8), (6, 8)), AB((2, 3), (5, 3)), tol=1e-4)
def linear_fn(x, w):
    return F.linear(x, w), F.linear(x, w, torch.ones(w.shape[0])), torch.addmm(torch.zeros(x.shape[0], w.shape[0]), x, w.t())


@case(AB((2, 4, 6, 8), (2, 4, 6, 8)), AB((1, 2, 3, 4), (1, 2, 3, 4)), tol=1e-4)
def attention(q, k):
    return F.scaled_dot_product_attention(q, k, k), F.scaled_dot_product_attention(q, k, k, is_causal=True)


# ---------------------------------------------------------------- creation


@case(A(3, 4), A(2, 2))
def creations(x):
    n = x.shape[0]
    return torch.zeros(n, 2), torch.ones_like(x), torch.full((2, n), 3.5), torch.arange(n), torch.eye(n), x + torch.arange(x.shape[1])


# ---------------------------------------------------------------- python constructs


def helper(x, scale=2.0):
    return x * scale + 1


@case(A(4), A(7))
def inline_user_function(x):
    return helper(x), helper(x, scale=0.5), helper(x=x)


@case(A(3, 3), A(2, 2))
def closures(x):
    k = 3.0

    def inner(y):
        return y * k

    return inner(x) + inner(1.0)


@case(A(4, 2), A(3, 3))
def loops_over_range(x):
    acc = x
    for i in range(3):
        acc = acc + i * x
    return acc


@case(A(4), A(5))
def loops_over_list(x):
    outs = []
    for s in [1.0, 2.0, 3.0]:
        outs.append(x * s)
    return outs


@case(A(4), A(2, 2))
def comprehensions(x):
    ys = [x * i for i in range(3)]
    d = {f"k{i}": y for i, y in enumerate(ys)}
    return sum(ys), d, tuple(y + 1 for y in ys)


@case(A(4, 4), A(3, 3))
def unpacking(x):
    a, *rest = [x, x * 2, x * 3]
    (b, c), d = (x, x + 1), x - 1
    return a, rest, b + c + d


@case(A(3), A(3, dtype=torch.float64))
def branch_on_dtype(x):
    if x.dtype == torch.float64:
        return x * 2
    return x * 3


@case(A(3), A(5))
def branch_on_shape(x):
    if x.shape[0] > 4:
        return x.sum()
    return x.mean()


@case(A(2, 3), A(3, 2), graphs=0)
def shape_reads(x):
    return x.size(), x.size(0), x.size(-1), x.dim(), x.ndim, x.numel(), x.shape[1:], len(x)


def _kw_fn(x, *, alpha=1.0, **extra):
    return x * alpha + sum(extra.values())


@case(A(3), A(4))
def kwargs_and_star(x):
    return _kw_fn(x, alpha=2.0, b=1.0, c=2.0), _kw_fn(*[x]), _kw_fn(**{"x": x, "alpha": 3.0})


@case(A(3), A(4))
def none_checks(x, bias=None):
    if bias is None:
        bias = torch.zeros_like(x)
    return x + bias, bias is not None


@case(A(3), A(4))
def isinstance_checks(x):
    if isinstance(x, torch.Tensor) and not isinstance(x, (list, tuple)):
        return x + 1
    return x


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    shift: float = 1.0


_cfg = Config()


@case(A(3), A(5))
def dataclass_attributes(x):
    return x * _cfg.scale + _cfg.shift


@case(A(3), A(5))
def fstring(x):
    name = f"layer_{x.shape[0]}_{x.dim():02d}"
    return x * len(name), name


@case(A(3, 3), A(4, 4))
def no_grad_context(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


@case(A(2, 2), A(3, 3))
def nested_returns(x):
    return {"a": (x, [x + 1, x + 2]), "b": x.sum(), "c": None, "d": 3}


@case(A(4), A(6), graphs=0)
def returns_input(x):
    return x


@case(A(4), A(6))
def global_constant(x):
    return x * GLOBAL_SCALE


GLOBAL_SCALE = 4.0


# ---------------------------------------------------------------- more torch functions and methods


@case(A(4, 5), A(3, 2))
def unary_methods(x):
    return x.neg(), x.abs(), x.exp(), x.expm1(), x.sin(), x.cos(), x.erf(), x.floor(), x.ceil(), x.round(), x.sign()


@case(lambda: (r(4, 5, lo=0.1),), lambda: (r(2, lo=0.1),))
def log_family(x):
    return x.log(), torch.log1p(x), x.sqrt(), x.rsqrt(), x.reciprocal()


@case(AB((4, 5), (4, 5)), AB((2,), (2,)))
def torch_binary_functions(x, y):
    return torch.add(x, y, alpha=2), torch.sub(x, y), torch.mul(x, 3), torch.div(x, 2), torch.true_divide(x, y.abs() + 1)


@case(AB((6,), (6,), lo=1, hi=5), AB((3,), (3,), lo=1, hi=5))
def division_modes(x, y):
    return torch.div(x, y, rounding_mode="floor"), torch.div(x, y, rounding_mode="trunc"), torch.remainder(x, y), x // 2, x % 3


@case(A(4, 6), A(2, 3))
def cumulative(x):
    return x.cumsum(0), torch.cumsum(x, dim=1)


@case(A(5, 7), A(3, 4))
def sorting(x):
    values, indices = torch.sort(x, dim=1)
    top = torch.topk(x, 2, dim=-1)
    return values, indices, top[0], x.sort(descending=True)[0]


@case(A(2, 3, 8, 8), A(1, 3, 6, 6))
def pooling_functional(x):
    return F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 1), F.max_pool2d(x, 3, stride=1, padding=1)


@case(AB((2, 3, 8, 8), (4, 3, 3, 3)), AB((1, 3, 5, 5), (4, 3, 3, 3)), tol=1e-4)
def conv_functional(x, w):
    return F.conv2d(x, w), F.conv2d(x, w, padding=1, stride=2), F.conv2d(x, w, torch.ones(4), padding="same")


@case(A(3, 8), A(2, 8))
def norms_functional(x):
    w = torch.ones(8) * 2
    return F.layer_norm(x, (8,)), F.layer_norm(x, [8], w, torch.zeros(8)), F.rms_norm(x, (8,), w, eps=1e-6)


@case(A(2, 4, 3, 3), A(1, 4, 2, 2))
def group_batch_norm_functional(x):
    c = x.shape[1]
    return F.group_norm(x, 2), F.batch_norm(x, torch.zeros(c), torch.ones(c), training=False)


@case(A(4, 4), A(3, 3))
def mask_ops(x):
    mask = x > 0
    return x.masked_fill(mask, 0.0), torch.where(mask, x, torch.zeros_like(x)), mask.sum(), mask.any()


@case(A(2, 3), A(4, 1))
def type_conversions(x):
    return x.to(torch.float64).sum(), x.half().float(), x.bfloat16().float(), (x * 10).long(), x.type_as(torch.ones(1, dtype=torch.float64))


@case(A(3, 4), A(2, 5))
def mean_var_keepdim(x):
    return x.mean(dim=-1, keepdim=True), x.var(0, keepdim=True), torch.std(x), torch.mean(x, (0, 1))


@case(A(6), A(4))
def size_arithmetic(x):
    n = x.numel()
    half = n // 2
    return x[:half] * 2, x[half:] + 1, x.reshape(2, half) if n % 2 == 0 else x


@case(A(2, 3, 4), A(3, 3, 3))
def negative_dims(x):
    return x.sum(-1), x.amax(-2), x.softmax(-3), x.transpose(-1, 0), x.flatten(-2), x.unsqueeze(-1).shape


@case(A(4, 4), A(2, 2))
def matmul_chain(x):
    return x @ x @ x.t(), torch.mm(x, torch.eye(x.shape[0]))


@case(A(8), A(3))
def scalar_tensor_ops(x):
    s = torch.tensor(2.5)
    return x * s, x + torch.tensor(1), torch.full_like(x, 7) - x


@case(A(5, 5), A(3, 3))
def triangular_masks(x):
    n = x.shape[0]
    i = torch.arange(n)
    causal = i[:, None] >= i[None, :]
    return x.masked_fill(~causal, float("-inf")).softmax(-1)


@case(A(3, 4), A(5, 2))
def stacking_lists(x):
    rows = [x[i] * (i + 1) for i in range(x.shape[0])]
    return torch.stack(rows), torch.cat(rows), sum(rows)


@case(A(3, 4), A(2, 5))
def zip_strict(x):
    # zip(..., strict=True) of iterables of one length: as zip (torch.nn.RNN's own code uses it)
    parts = x.unbind(0)
    return [a * b for a, b in zip(parts, [1.5, -2.0, 3.0][: len(parts)], strict=True)]


@case(A(3, 4), graphs=0, breaks=1)
def zip_strict_of_different_lengths(x):
    # CPython raises only once the loop reaches the end of the shortest: eager's, a break
    out = []
    try:
        for a, b in zip(x.unbind(0), [1.0, 2.0], strict=True):
            out.append(a * b)
    except ValueError:
        out.append(x.sum())
    return out


@case(A(4, 3), A(2, 3))
def unbind_and_zip(x):
    parts = x.unbind(0)
    return [a + b for a, b in zip(parts, reversed(parts))]


# ---------------------------------------------------------------- Python constructs


def _add(a, b):
    return a + b


def _apply(fn, *args):
    return fn(*args)


@case(AB((3,), (3,)), AB((4,), (4,)))
def higher_order_functions(x, y):
    return _apply(_add, x, y), _apply(torch.mul, x, y), _apply(lambda u: u * 2, x)


@case(A(4), A(5))
def nested_closures(x):
    def outer(k):
        def inner(y):
            return y * k

        return inner

    return outer(2.0)(x) + outer(3.0)(x)


@case(A(3), A(6))
def while_loop_on_constants(x):
    i, acc = 0, x
    while i < 3:
        acc = acc * 2
        i += 1
    return acc, i


@case(A(3), A(6))
def tuple_methods_and_slicing(x):
    t = (1, 2, 3, 4)
    return x * t[-1], x + len(t[1:3]), t.index(3), t[::2]


@case(A(3), A(6))
def dict_methods(x):
    d = {"a": 1.0, "b": 2.0}
    d["c"] = 3.0
    total = x
    for k, v in d.items():
        total = total + v
    return total, d.get("z", 5.0), list(d.keys())


@case(A(3), A(6))
def string_formatting(x):
    tag = "n=%d" % x.shape[0]
    name = "{}-{}".format("layer", x.dim())
    return x * len(tag), name.upper()


@case(A(3), A(6))
def boolean_logic(x):
    big = x.shape[0] > 4
    flag = not big and x.dim() == 1
    return x * (2 if big or flag else 3), flag


@case(A(2, 2), A(3, 3))
def chained_comparisons(x):
    n = x.shape[0]
    return x + (1 if 0 < n < 3 else -1)


@case(A(3), A(4))
def default_and_keyword_args(x, scale=2.0, *, bias=1.0):
    return x * scale + bias


@case(A(3), A(4))
def enumerate_start(x):
    return [x * i for i, _ in enumerate(range(3), start=1)]


@case(A(3), A(4))
def builtin_min_max_abs(x):
    n = x.shape[0]
    return x * max(n, 2) + min(1, n) - abs(-n), max([1, 5, 3])


@case(A(2, 3), A(2, 3, dtype=torch.float64))
def dtype_checks(x):
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.float()
    if x.is_floating_point() and x.dtype is torch.float32:
        return x * 2
    return x * 3


@case(A(3), A(4))
def getattr_builtin(x):
    return getattr(x, "shape")[0], getattr(torch, "relu")(x), hasattr(x, "shape")


@case(A(2, 3), A(3, 4), graphs=0)
def returns_torch_size(x):
    return x.shape, x.size()


@case(A(2, 3), A(4, 1, 5))
def sequence_concat_and_repeat(x):
    mems = ()
    for k in range(2):
        mems = mems + (x * k,)  # a constant tuple + a tuple of tensors (XLNet's new_mems)
    shape = x.shape + (1,)
    return mems, (1,) + x.shape, shape, x.shape * 2, 2 * [x.shape[0]], x.reshape(shape)


@case(A(3, 4), A(2, 2, dtype=torch.float64))
def tensor_type(x):
    return x.type(torch.float64) * 2, x.type(torch.int32), x.type(), x.half().type()


class _Holder:
    def __init__(self):
        self.factor = 4.0
        self.items = (1, 2)

    def scale(self, x):
        return x * self.factor


_holder = _Holder()


@case(A(3), A(5))
def user_object_methods(x):
    return _holder.scale(x) + _holder.items[1]


# ---------------------------------------------------------------- graph breaks


@case(A(4), A(4), graphs=1, breaks=1)
def breaks_on_print(x):
    print("side effect")
    return x + 1


@case(A(4), A(5), graphs=2, breaks=1)
def breaks_between_graphs(x):
    y = x.sin() * 2
    print("between", y.shape)
    return y.cos() + x


@case(A(3, 4), A(2, 2), graphs=2, breaks=1)
def breaks_keep_locals_and_stack(x):
    outs = [x * 2]
    scale = 3
    n = len(str(x.shape))  # a builtin call on a constant
    outs.append(x.sum(0) * scale + n)
    print("mid")
    return outs[0] + 1, outs[1], scale


# .item() of data: the break is at the call (Tensor.item has a rule, for 0-d tensors known at trace
# time), so x.sum() is a graph before it and x * v one after, as Dynamo splits it
@case(A(4), A(4), graphs=2, breaks=1)
def breaks_on_item(x):
    return x * x.sum().item()


@case(A(4), lambda: (-r(4).abs(),), graphs=2, breaks=1)
def breaks_on_data_dependent_if(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


@case(A(4), A(4), graphs=0, breaks=1)
def breaks_on_numpy(x):
    return torch.from_numpy(x.numpy() * 2) + x


@pytest.mark.parametrize("fn,input_sets,graphs,breaks,tol", CASES)
def test_capture(fn, input_sets, graphs, breaks, tol):
    pt2.reset()
    compiled = pt2.compile(fn)
    for make_inputs in input_sets:
        args = make_inputs()
        with torch.no_grad():
            ref = fn(*args)
            out = compiled(*args)
            out2 = compiled(*args)  # the cache-hit path
        compare(out, ref, tol)
        compare(out2, ref, tol)
        if breaks == 0:
            same_aliasing(out2, ref, args)
    args = input_sets[0]()
    with torch.no_grad():
        if graphs == 1 and breaks == 0 and views_only(fn, args):
            graphs = 0  # views of the inputs come back as views, without a kernel
    explained = pt2.explain(fn)(*args)
    assert explained.graph_count == graphs, f"graphs: {explained.graph_count} (breaks: {explained.break_reasons})"
    assert explained.graph_break_count == breaks, f"breaks: {explained.break_reasons}"
    for b in explained.break_reasons:
        assert b.filename.endswith(".py") and b.lineno > 0, b
