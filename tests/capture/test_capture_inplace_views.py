"""In-place ops through views (capture/inplace.c), each compared with eager on
fresh inputs, capture and cache hit: an in-place op on a view writes through to
the tensor it was taken from (slice, select, permute, reshape, detach), and
every other view of that memory is taken again, so one graph holds what used to
be a break ("in-place on a tensor that shares memory with a view").  Odd sizes;
float32, float64 and int64 where the op takes them."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from test_capture import A, AB, r
from test_capture_objects import check, counts, run_both

DTYPES = [torch.float32, torch.float64, torch.int64]


# ---------------------------------------------------------------- a view written, its base read


def ghost_module(x):
    # timm's GhostModule then GhostBottleneck: the module returns a slice of a
    # cat, which its caller adds its shortcut to in place
    out = torch.cat([x, x * 2], dim=1)
    y = out[:, :3]
    y += x[:, :3]
    return y, out


def slice_then_base(x):
    y = x * 1
    y[1:, ::2].mul_(3)  # a strided slice
    y[:, -2:] += 1
    return y


def select_then_base(x):
    y = x + 0
    y.select(1, -1).zero_()
    y[0].fill_(5)
    return y


def transpose_then_base(x):
    y = x * 2
    y.t().add_(torch.arange(y.shape[0], dtype=y.dtype))  # broadcast over the transpose's rows
    return y


def reshape_then_base(x):
    y = x - 1
    v = y.view(-1)
    v[3:7] = 0
    y.unsqueeze(0)[0, 1].add_(10)
    return y, v


def nested_views(x):
    y = x * 1
    a = y[1:]  # slice
    b = a.transpose(0, 1)  # permute of the slice
    c = b[2]  # select of that
    c.mul_(-1)
    return y, a, b, c


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", [slice_then_base, select_then_base, transpose_then_base, reshape_then_base, nested_views])
def test_inplace_on_view_reaches_base(fn, dtype):
    check(fn, A(5, 7, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ghostnet_slice_of_cat_added_in_place(dtype):
    check(ghost_module, A(2, 5, 3, dtype=dtype))


# ---------------------------------------------------------------- the base written, its views read


def base_then_views(x):
    y = x * 1
    row, col, tr, flat = y[1], y[:, 2], y.t(), y.reshape(-1)
    y.add_(1)
    y[0, 0] = 100
    return row + 0, col * 1, tr.sum(0), flat[:4] + 0


def sibling_views(x):
    y = x + 1
    top, left = y[:2], y[:, :3]
    top.mul_(2)  # left overlaps top: it sees the change
    return left + 0, y


def detach_alias(x):
    y = x * 3
    d = y.detach()
    d.sub_(1)
    return y + 0


def relu_inplace_on_slice(x):
    y = x * 1
    F.relu(y[:, 1:4], inplace=True)
    return y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", [base_then_views, sibling_views, detach_alias])
def test_views_see_inplace_ops(fn, dtype):
    check(fn, A(5, 7, dtype=dtype))


def test_relu_inplace_on_a_slice():
    check(relu_inplace_on_slice, A(3, 5))


def test_inplace_view_in_a_chain_of_blocks():
    def fn(x, w):
        for _ in range(3):
            out = torch.cat([x @ w, torch.sin(x)], dim=-1)
            y = out[..., : x.shape[-1]]
            y += x
            x = y
        return x

    check(fn, AB((3, 5), (5, 5)))


# ---------------------------------------------------------------- graph inputs and what stays a break


def view_of_input(x):
    x[1:3].mul_(2)  # the input changes: written back after the graph
    x.t()[0] += 1
    return x.sum()


def test_inplace_on_a_view_of_an_input():
    check(view_of_input, A(4, 5))


def test_inplace_on_an_input_viewed_by_a_local():
    def fn(x):
        v = x[:, 1]
        x.add_(1)
        return v * 2

    check(fn, A(3, 4))


def reshape_copy_then_inplace(x):
    y = x.t().reshape(-1)  # not viewable: eager copies, so y is memory of its own
    y.add_(1)
    return y, x + 0


def test_reshape_that_copies_is_not_a_view():
    check(reshape_copy_then_inplace, A(3, 4))


def inplace_on_expand(x):
    y = x * 1
    z = y.expand(3, *y.shape)
    z.add_(1)  # eager raises: elements of z share memory
    return z


def test_inplace_on_an_expand_raises_as_eager():
    # pt2 breaks before the add_ (an expand is not written through), and
    # eager's add_ then raises as it does without pt2
    x = r(4)
    with pytest.raises(RuntimeError, match="single memory location"):
        inplace_on_expand(x.clone())
    pt2.reset()
    with pytest.raises(RuntimeError, match="single memory location"):
        pt2.compile(inplace_on_expand)(x.clone())


def inplace_on_select_at_index_tensor(x, i):
    y = x * 1
    w = y[i]  # a 0-d index tensor: a select (a view) at a position known at run time
    w.add_(100)  # y sees it in eager: pt2 breaks rather than lose it
    return y


def inplace_on_base_of_select_at_index_tensor(x, i):
    y = x * 1
    w = y[i]
    y.mul_(2)  # w sees it in eager
    return w + 0


@pytest.mark.parametrize("fn", [inplace_on_select_at_index_tensor, inplace_on_base_of_select_at_index_tensor])
def test_select_at_an_index_tensor_is_a_view(fn):
    run_both(fn, lambda: (r(3, 5), torch.tensor(1)))


def _outcome(fn, x):
    try:
        return fn(x)
    except RuntimeError as e:
        return type(e)


def test_inplace_reading_another_view_of_its_memory():
    """An in-place op whose operand is another view of the memory it writes: eager raises where the
    two partially overlap (x[1:] = x[:-1], x += x.t()) and reads the old values where they do not
    (x[:2] = x[2:]); pt2 leaves each to eager (a break), never an answer eager would not give."""
    def shift(x):
        x[1:] = x[:-1]
        return x

    def shift_add(x):
        x[1:] += x[:-1]
        return x

    def add_transpose(x):
        x += x.t()
        return x

    def disjoint(x):
        x[:2] = x[2:]
        return x * 2

    def same(x):
        x.add_(x)
        return x

    def flipped(x):
        x.copy_(x.flip(0))
        return x

    for fn in (shift, shift_add, add_transpose, disjoint, same, flipped):
        base = r(4, 4)
        pt2.reset()
        want, got = _outcome(fn, base.clone()), _outcome(pt2.compile(fn), base.clone())
        if isinstance(want, type):
            assert got is want, fn.__name__
        else:
            torch.testing.assert_close(got, want, rtol=0, atol=0)
