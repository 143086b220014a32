"""F.interpolate's kernels traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py):
nearest and nearest-exact in 1, 2 and 3 dimensions, linear, bilinear, trilinear and bicubic, with and
without align_corners, sizes and scale factors (up, down, fractional, one per dimension), against eager
and counted through pt2.explain (one graph, no break).  antialias stays eager's (a break).  Also
F.grid_sample's kernels (2-d and 3-d, every mode and padding) and F.affine_grid's."""
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


def test_antialias_runs_eager_s_kernel():
    """The antialiased kernels (_upsample_bilinear2d_aa, ...) have no Python form: eager's own kernel in the
    graph (pt2.aten), eager's result."""
    x = rand(1, 2, 12, 10)
    check(lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True) * 2, x)


GRID_MODES = [("bilinear", 2), ("nearest", 2), ("bicubic", 2), ("bilinear", 3), ("nearest", 3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode,dims", GRID_MODES)
def test_grid_sample(mode, dims, padding_mode, align_corners, dtype):
    """F.grid_sample (torch.grid_sampler's form): points inside, outside ([-1.6, 1.6], all three paddings),
    exactly on the corners and on pixel centers (nearest's half-to-even ties), odd sizes, a non-contiguous
    input; one graph, eager's values."""
    g = torch.Generator().manual_seed(dims * 7 + len(mode))
    shape = (2, 3, 5, 7) if dims == 2 else (2, 3, 4, 5, 3)
    x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    if dims == 2:
        x = x.transpose(2, 3).contiguous().transpose(2, 3)  # channels' rows strided
    out = (2, 6, 9, dims) if dims == 2 else (2, 3, 4, 5, dims)
    grid = (torch.rand(out, generator=g, dtype=torch.float64) * 3.2 - 1.6).to(dtype)
    grid.view(-1, dims)[:4] = torch.tensor([[-1.0] * dims, [1.0] * dims, [0.0] * dims, [0.5] * dims], dtype=dtype)
    check(lambda x, grid: F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners), x, grid,
          tol=1e-5 if dtype == torch.float32 else 1e-10)


def test_grid_sample_in_a_warp():
    """A flow warp as optical-flow and spatial-transformer models write it: affine_grid, a displacement,
    grid_sample, fused with what follows; bfloat16 runs eager's own kernel in the graph."""
    g = torch.Generator().manual_seed(1)
    img, flow = torch.randn(2, 4, 9, 11, generator=g), torch.randn(2, 9, 11, 2, generator=g) * 0.1
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]]).expand(2, 2, 3)

    def warp(img, flow, theta):
        base = F.affine_grid(theta, list(img.shape), align_corners=False)
        return torch.relu(F.grid_sample(img, base + flow, align_corners=False, padding_mode="border")) * 2

    check(warp, img, flow, theta, tol=1e-5)
    # bfloat16: eager's own grid_sample kernel inside the graph (pt2.aten), on the grid pt2 computes (within
    # one bf16 step of eager's: pt2 rounds the affine grid's fused chain once) -- eager's kernel on that grid
    # bit for bit
    args = img.bfloat16(), flow.bfloat16(), theta.bfloat16()

    def grid_of(img, flow, theta):
        return F.affine_grid(theta, list(img.shape), align_corners=False) + flow

    pt2.reset()
    grid = pt2.compile(grid_of)(*args)
    torch.testing.assert_close(grid, grid_of(*args), atol=2 ** -7, rtol=0)
    pt2.reset()
    got = pt2.compile(warp)(*args)
    assert torch.equal(got, torch.relu(F.grid_sample(args[0], grid, align_corners=False, padding_mode="border")) * 2)


@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid")  # F.affine_grid's own, for unit sizes
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 5, 7), (2, 1, 1, 6), (2, 3, 4, 1, 5), (2, 2, 1, 3, 1)])
def test_affine_grid(size, align_corners):
    """F.affine_grid (torch.affine_grid_generator's form): 4-d and 5-d sizes, sizes of 1 (a single 0
    coordinate), float32 and float64 thetas."""
    k = len(size) - 2
    for dtype in (torch.float32, torch.float64):
        theta = rand(2, k, k + 1, seed=k, dtype=dtype)
        check(lambda t: F.affine_grid(t, list(size), align_corners=align_corners), theta, tol=1e-6)
