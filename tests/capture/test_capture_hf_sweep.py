"""Constructs that split HuggingFace models in the whole-list run of 2026-12-01
(bench/models.py --suite hf), each compared with eager: Tensor.new_ones /
new_zeros / new_full / new_empty (masking_utils' and_masks, BigBird, Megatron,
M2M100, Longformer)."""
import pytest
import torch

import pt2
from test_capture import r
from test_capture_breaks_hf import check

DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool]


# ---------------------------------------------------------------- Tensor.new_*


def new_factories(x):
    ones = x.new_ones((), dtype=torch.bool)  # masking_utils.and_mask's start
    zeros = x.new_zeros(2, 3)  # sizes as varargs
    full = x.new_full((3,), 7)  # x's dtype, not the fill value's
    wide = x.new_ones([2, 1], dtype=torch.int64)
    none = x.new_empty((0, 5))
    return ones & (x != 0), zeros, full, wide, none, x.new_zeros(x.shape) + x


@pytest.mark.parametrize("dtype", DTYPES)
def test_new_factories(dtype):
    check(new_factories, lambda: (r(3, dtype=dtype),), graphs=1, breaks=0)


def test_and_masks_of_mask_functions():
    def and_mask(q_idx, kv_idx, fns):
        result = q_idx.new_ones((), dtype=torch.bool)
        for fn in fns:
            result = result & fn(q_idx, kv_idx)
        return result

    def fn(q, kv):
        return and_mask(q[:, None], kv[None, :], [lambda a, b: a >= b, lambda a, b: (a - b) < 3])

    check(fn, lambda: (torch.arange(7), torch.arange(5)), graphs=1, breaks=0)


# ---------------------------------------------------------------- `is None` of containers


class Output(dict):
    # transformers' ModelOutput.__post_init__ asks `self.__dict__.get(name) is None`
    # of every field, and DeBERTa's hidden_states field is a tuple made in the trace
    def __init__(self, **kw):
        super().__init__(**kw)
        self.__dict__.update(kw)

    def others_are_none(self, names):
        return all(self.__dict__.get(n) is None for n in names)


def is_none_of_containers(x, outside):
    made = (x, x * 2)
    seq = [x]
    d = {"a": x}
    out = Output(first=x + 1, hidden=made, extra=None)
    flags = (made is None, None is seq, d is not None, outside is None, outside[0] is None, range(2) is None,
             slice(1) is None, iter(seq) is None, out.others_are_none(["extra"]), out.others_are_none(["hidden", "extra"]))
    return x + sum(flags), flags


def test_is_none_of_containers():
    check(is_none_of_containers, lambda: (r(3, 4), (1, None)), graphs=1, breaks=0)


def test_is_none_of_a_tuple_from_outside_is_guarded():
    compiled = pt2.compile(lambda x, t: x + 1 if t is None else x - 1)
    x = r(3)
    torch.testing.assert_close(compiled(x, (1, 2)), x - 1)
    torch.testing.assert_close(compiled(x, None), x + 1)


# ---------------------------------------------------------------- parameters told apart pairwise


class Deep(torch.nn.Module):
    # transformers' `self.dtype` / `self.device` walk parameters(): its memo
    # tells every parameter apart from every earlier one (an ALIAS_MATCH guard
    # per pair); XLNet asks both, and its trace took minutes
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(n))

    @property
    def dtype(self):
        return next(p.dtype for p in self.parameters() if p.is_floating_point())

    @property
    def device(self):
        return next(p.device for p in self.parameters())

    def forward(self, x):
        x = x.to(device=self.device, dtype=self.dtype)
        for layer in self.layers:
            x = layer(x) * (1.0 if self.dtype == torch.float32 else 2.0)
        return x


def test_many_parameters_told_apart():
    import time

    m = Deep(120).eval()
    x = r(2, 3)
    pt2.reset()
    compiled = pt2.compile(m)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = compiled(x)
        torch.testing.assert_close(out, m(x), rtol=1e-5, atol=1e-5)
    assert time.perf_counter() - t0 < 60
    # the pairs are still guarded: tying two weights recompiles, as eager sees one tensor
    m.layers[1].weight = m.layers[0].weight
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x), rtol=1e-5, atol=1e-5)
