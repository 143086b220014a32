"""torch._higher_order_ops.associative_scan through pt2 (capture/polyfills.c's python_function_form, the form in
python/pt2/_polyfills_wrappers.py): Mamba's selective scan, which transformers runs under a compiler, an
element-wise combine over a tuple and a list, one that is not element-wise (products of 2x2 matrices: the
combine_fn sees one element at a time, as under eager's vmap), reverse scans, negative dims, a length of
one, eager's argument errors; longer than 64 stays torch's function (a break, eager's values)."""
import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan

import pt2
from eager_check import check


def ssm(left, right):  # Mamba's: h_t = a_t * h_(t-1) + b_t, as pairs
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [2, -1, 0])
def test_selective_scan_pairs(dim, reverse):
    a, b = rand(3, 4, 17, 5, seed=1).sigmoid(), rand(3, 4, 17, 5, seed=2)
    if dim == -1:
        a, b = a.transpose(2, 3).contiguous(), b.transpose(2, 3).contiguous()
    if dim == 0:
        a, b = a[0].permute(1, 0, 2).contiguous(), b[0].permute(1, 0, 2).contiguous()

    def f(a, b):
        h = associative_scan(ssm, (a, b), dim=dim, reverse=reverse, combine_mode="generic")
        return h[1] * 2, h[0]

    check(f, a, b, tol=1e-5)


def test_a_list_and_a_single_tensor():
    x = rand(6, 11, seed=3)
    check(lambda x: associative_scan(lambda p, q: [p[0] + q[0], torch.maximum(p[1], q[1])], [x, x * 3], 1,
                                     combine_mode="generic"), x, tol=1e-5)
    check(lambda x: associative_scan(lambda p, q: p * q, x.tanh(), 0, combine_mode="generic") + 1, x, tol=1e-5)
    check(lambda x: associative_scan(lambda p, q: p + q, x[:, :1], 1, combine_mode="generic") * 2, x, tol=1e-6)  # one


def test_a_combine_that_is_not_elementwise():
    """Products of 2x2 matrices along the scan: under eager's vmap the combine_fn sees one [2, 2] pair
    at a time (its `@` and `.T` mean that); the form calls it the same way."""
    m = rand(9, 2, 2, seed=4) * 0.5
    check(lambda m: associative_scan(lambda p, q: q @ p.T.T, m, 0, combine_mode="generic"), m, tol=1e-5)


def test_longer_than_64_stays_torchs_function():
    x = rand(3, 65, seed=5)

    def f(x):
        return associative_scan(lambda p, q: p + q, x, 1, combine_mode="generic") * 2

    pt2.reset()
    with torch.no_grad():
        torch.testing.assert_close(pt2.compile(f)(x), f(x), rtol=1e-5, atol=1e-5)
        assert pt2.explain(f)(x).graph_break_count >= 1  # inside torch's own function (its vmap)


def test_eager_argument_errors():
    x = rand(4, 5, seed=6)
    for mode in ("pointwise", "parallel"):  # pointwise needs CUDA tensors; an unknown mode
        with pytest.raises(ValueError):
            associative_scan(lambda p, q: p + q, x, 0, combine_mode=mode)
        pt2.reset()
        with pytest.raises(ValueError):
            pt2.compile(lambda x: associative_scan(lambda p, q: p + q, x, 0, combine_mode=mode))(x)
