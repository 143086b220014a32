"""torch.nn.functional calls eager refuses are refused under pt2.compile too, with eager's error (the
capture leaves them to the C op or to F's own Python checks), never a result: interpolate to an empty
size, batch_norm over parameters of another dtype than the input's (a half input with float32 ones is
eager's mixed type and runs), group_norm of one value per channel or of groups that do not divide the
channels.  Found by a random-graph fuzz comparing each op's eager error with pt2's."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check


def raises_like_eager(fn, *args):
    with pytest.raises(Exception) as want:
        fn(*args)
    pt2.reset()
    with torch.no_grad(), pytest.raises(type(want.value)) as got:
        pt2.compile(fn)(*args)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
def test_interpolate_to_an_empty_size(mode):
    x = torch.randn(1, 2, 1, 3)
    raises_like_eager(lambda x: F.interpolate(x, scale_factor=0.5, mode=mode), x)
    raises_like_eager(lambda x: F.interpolate(x, size=(0, 2), mode=mode), x)
    check(lambda x: F.interpolate(x, scale_factor=2.0, mode=mode), x, tol=1e-5)  # and what runs still runs


def test_batch_norm_parameter_dtypes():
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    raises_like_eager(lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3), training=False), x)
    stats = (torch.rand(3), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3))
    check(lambda x: F.batch_norm(x, *stats[:2], *stats[2:], training=False), torch.randn(2, 3, 5).bfloat16(), tol=2e-2)
    check(lambda x: F.batch_norm(x, *[s.double() for s in stats[:2]], training=False), x)


def test_group_norm_sizes():
    raises_like_eager(lambda x: F.group_norm(x, 1), torch.randn(1, 1, 1, 1))
    raises_like_eager(lambda x: F.group_norm(x, 4), torch.randn(2, 6, 3))
    check(lambda x: F.group_norm(x, 3), torch.randn(2, 6, 3), tol=1e-5)
