"""What HF's Longformer needed to trace as one graph (docs/capture.md, "Sizes as tensors, as_strided"),
each against eager:
- torch.div of numbers known at trace time (sizes) is a 0-d tensor whose value the trace knows
  (Var.known): a view's size, arithmetic with numbers and .item() read it; a division by zero raises
  as eager;
- x.as_strided(size, stride) of a tensor dense in eager (contiguous, or a permutation of that: a
  transpose, heads split from one projection) is a gather of x's elements in memory order, overlapping
  windows included; a slice, an explicit storage_offset, indices past the tensor break (eager runs
  it); in-place writes to the result or its base break;
- x.where(condition, y), the method, takes x as the input (it took x as the condition: a bool x gave
  a wrong result);
- x.new_ones(size=...) and torch.zeros(size=...) take the size as a keyword;
- a layer norm's, a linear's, a reduction's strides are known (contiguous, as eager allocates them)
  even of an operand whose strides pt2 does not model (an einsum's), so .stride() further on works;
- bad inputs eager rejects: sdpa with a 1-d mask, bilinear of mixed dtypes, torch.ones() and
  x.new_zeros() without a size (pt2 had returned a result)."""
import pytest
import torch
from eager_check import same as same_result

import pt2


def outcome(f, *args):
    try:
        return "ok", f(*args)
    except Exception as e:  # noqa: BLE001 - the exception's type is what is compared
        return "raise", type(e)


def same(f, *args, breaks=None):
    """f compiled against eager, each on fresh copies of the inputs (f may write them): the same
    results (eager_check.same) or the same exception type; `breaks`: how many graph breaks pt2 makes."""
    pt2.reset()
    fresh = lambda: [a.clone() if isinstance(a, torch.Tensor) else a for a in args]  # noqa: E731
    e, c = outcome(f, *fresh()), outcome(pt2.compile(f), *fresh())
    assert e[0] == c[0], (e, c)
    if e[0] == "raise":
        assert e[1] == c[1], (e, c)
        return
    same_result(c[1], e[1], tol=1e-6)
    if breaks is not None:
        pt2.reset()
        ex = pt2.explain(f)(*fresh())
        assert ex.graph_break_count == breaks, ex.break_reasons


# --- sizes as 0-d tensors ------------------------------------------------------------------------

def test_div_of_sizes_is_a_size():
    def f(x):
        n = torch.div(x.size(1), 4, rounding_mode="trunc")
        m = torch.div(x.size(1), 4, rounding_mode="floor") - 1
        return x.view(x.size(0), n, 4) * n, x * m.item(), torch.div(7, 2) + x, x.view(-1, m + 1, 4)

    same(f, torch.randn(3, 12), breaks=0)


@pytest.mark.parametrize("a,b,mode", [(7, 2, None), (-7, 2, "trunc"), (-7, 2, "floor"), (7.5, 2, "floor"), (7, -2.0, "trunc")])
def test_div_of_numbers_as_eager(a, b, mode):
    same(lambda x: x + torch.div(a, b, rounding_mode=mode), torch.zeros(2), breaks=0)


def test_known_arithmetic_keeps_dtype():
    def f(x):
        n = torch.div(x.size(0), 2, rounding_mode="trunc")
        return (n * 3).item(), (n / 2).item(), (2 - n).item(), (n // 2).item(), (n % 3).item(), x + (n ** 2)

    same(f, torch.randn(9), breaks=0)


def test_div_by_zero_raises_as_eager():
    same(lambda x: x + torch.div(x.size(0), 0, rounding_mode="trunc"), torch.randn(3))


def test_float_tensor_as_a_size_raises_as_eager():
    same(lambda x: x.view(torch.div(x.size(0), 2), 2), torch.randn(4))


def test_item_of_data_still_breaks():
    same(lambda x: x * x.sum().item(), torch.randn(3), breaks=1)


# --- as_strided ----------------------------------------------------------------------------------

def chunk(h, w):
    """Longformer's _chunk: chunks of 2w rows, overlapping by w."""
    h = h.view(h.size(0), torch.div(h.size(1), w * 2, rounding_mode="trunc"), w * 2, h.size(2))
    size, stride = list(h.size()), list(h.stride())
    size[1] = size[1] * 2 - 1
    stride[1] = stride[1] // 2
    return h.as_strided(size=size, stride=stride)


@pytest.mark.parametrize("batch", [1, 2])
def test_overlapping_chunks_of_heads(batch):
    def f(q):
        B, S, H, D = q.size()
        q = q.transpose(1, 2).reshape(B * H, S, D)  # a view at batch 1 (transposed), a copy at 2
        return chunk(q, 4) * 2

    same(f, torch.randn(batch, 24, 3, 5), breaks=0)


@pytest.mark.parametrize("size,stride", [((2, 2), (1, 2)), ((3, 3), (4, 1)), ((4,), (3,)), ((2, 3), (0, 1))])
def test_as_strided_of_a_transpose(size, stride):
    same(lambda x: x.t().as_strided(size, stride) + 0, torch.randn(3, 4), breaks=0)


def test_as_strided_edges():
    same(lambda x: torch.as_strided(x, (3, 3), (1, 1)) + 0, torch.randn(10), breaks=0)
    same(lambda x: (x.as_strided((0, 3), (1, 1)) + 1, x.as_strided((), ()) + 1), torch.randn(4), breaks=0)


@pytest.mark.parametrize("case", ["slice", "offset", "past", "inplace", "base_inplace"])
def test_as_strided_that_breaks_runs_eagerly(case):
    def f(x):
        if case == "slice":
            return x[:, 1:].as_strided((2, 2), (1, 1)) * 2
        if case == "offset":
            return x.as_strided((2, 2), (1, 1), 3) * 2
        if case == "past":  # past x, within its storage
            return x[:2].as_strided((3, 4), (4, 1)) * 2
        y = x.as_strided((2, 2), (1, 1))
        if case == "inplace":
            y.add_(1)
            return y * 2
        x.mul_(3)
        return y * 2

    same(f, torch.randn(3, 4), breaks=1)


# --- methods and keywords ------------------------------------------------------------------------

def test_where_method_takes_self_as_input():
    c = torch.rand(4, 5) > 0.5
    for x, y in ((torch.randn(4, 5), torch.randn(4, 5)), (torch.rand(4, 5) > 0.3, torch.rand(4, 5) > 0.6)):
        same(lambda x, c, y: (x.where(c, y), torch.where(c, x, y)), x, c, y, breaks=0)
    same(lambda x, c: x.where(c, 2.5), torch.randn(4, 5), c, breaks=0)


def test_size_as_a_keyword():
    same(lambda x: (x.new_ones(size=x.size()) + x, torch.zeros(size=(2, 3)), x.new_zeros((2, 2)), x.new_ones(3, 4)),
         torch.randn(3, 4), breaks=0)


# --- strides of fresh results --------------------------------------------------------------------

def test_strides_known_after_an_unmodelled_op():
    ln = torch.nn.LayerNorm(6)
    lin = torch.nn.Linear(6, 6)

    def f(a, b):
        s = torch.einsum("bxd,byd->bxy", a, b)  # its strides are not modelled
        h = ln(s)
        o = lin(s).transpose(0, 1)
        return h * 2, o.contiguous(), torch.tensor(h.stride()), torch.tensor(o.stride()), torch.tensor(s.sum(-1).stride())

    with torch.no_grad():
        same(f, torch.randn(2, 6, 4), torch.randn(2, 6, 4), breaks=0)


# --- bad inputs that eager rejects (pt2 had returned a result) -----------------------------------

def test_rejected_inputs_raise_as_eager():
    import torch.nn.functional as F

    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    w = torch.randn(4, 3, 5)
    same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(6, dtype=torch.bool)), q, k, v)
    same(lambda a, b: F.bilinear(a, b, w), torch.randn(2, 3), torch.randn(2, 5).double())
    same(lambda x: torch.ones() + x, torch.randn(2))
    same(lambda x: x.new_zeros() + x, torch.randn(2))
    # and what they reject is all they reject
    same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 6, dtype=torch.bool)), q, k, v, breaks=0)
    same(lambda a, b: F.bilinear(a, b, w), torch.randn(2, 7, 3), torch.randn(2, 7, 5), breaks=0)
    same(lambda x: torch.zeros(()) + x, torch.randn(2), breaks=0)
