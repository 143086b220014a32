"""F.interpolate's kernels traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py):
nearest and nearest-exact in 1, 2 and 3 dimensions, linear, bilinear, trilinear and bicubic, with and
without align_corners, sizes and scale factors (up, down, fractional, one per dimension), against eager
and counted through pt2.explain (one graph, no break).  antialias stays eager's (a break)."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check


def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)



INPUTS = {1: (2, 3, 11), 2: (2, 3, 5, 7), 3: (1, 2, 4, 5, 3)}
SCALES = {1: [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.6), dict(size=13), dict(size=4)],
          2: [dict(scale_factor=2), dict(scale_factor=1.5), dict(scale_factor=0.5), dict(size=(7, 5)),
              dict(size=(11, 13)), dict(scale_factor=(2, 0.7))],
          3: [dict(scale_factor=2), dict(scale_factor=(1.5, 0.8, 2.5)), dict(size=(3, 7, 4))]}


def cases(modes):
    for mode, dims, aligned in modes:
        for kw in SCALES[dims]:
            for ac in ((False, True) if aligned else (None,)):
                yield pytest.param(mode, dims, ac, kw, id=f"{mode}-{dims}d-{ac}-{kw}")


@pytest.mark.parametrize("mode,dims,align_corners,kw", list(cases([
    ("nearest", 1, False), ("nearest", 3, False), ("nearest-exact", 1, False), ("nearest-exact", 2, False),
    ("nearest-exact", 3, False), ("linear", 1, True), ("bilinear", 2, True), ("trilinear", 3, True), ("bicubic", 2, True)])))
def test_interpolate_modes(mode, dims, align_corners, kw):
    x = rand(*INPUTS[dims])
    check(lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw), x)


@pytest.mark.parametrize("mode", ["bicubic", "trilinear", "nearest-exact"])
def test_interpolate_f64_channels_last_and_edges(mode):
    """float64 (its index math in float64), channels-last inputs, and bicubic's taps past the edges
    (clamped) on a 2-pixel input."""
    dims = 3 if mode == "trilinear" else 2
    x = rand(*INPUTS[dims], dtype=torch.float64)
    check(lambda x: F.interpolate(x, scale_factor=2.5, mode=mode), x, tol=1e-12)
    if dims == 2:
        xc = rand(2, 3, 6, 5).to(memory_format=torch.channels_last)
        check(lambda x: F.interpolate(x, scale_factor=1.5, mode=mode), xc)
        check(lambda x: F.interpolate(x, size=(5, 9), mode=mode), rand(1, 2, 2, 2))


def test_upsample_modules():
    ups = [torch.nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True), torch.nn.Upsample(size=(9, 6), mode="nearest-exact")]
    x = rand(1, 3, 4, 5)
    check(lambda x: ups[1](ups[0](x)), x)


def test_antialias_stays_eager():
    """The antialiased kernels (_upsample_bilinear2d_aa, ...) have no Python form: a break, eager's result."""
    x = rand(1, 2, 12, 10)
    check(lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True) * 2, x, breaks=1)
