"""Half-precision conv2d rounded once by its call (pt2-extern-blas, runtime/rt/conv_half.c and conv.c):
a bf16/f16 conv writes its half result, the adds after it (a bias, a residual) made in f32 before the one
rounding, where it wrote an f32 accumulator that a kernel then rounded.  Against a float64 oracle rounded
once (bit for bit but for ties the f32 accumulation moves) and eager (which rounds a conv's separate adds
again): conv2d's geometry forms, bias, residual, both, an addend oneDNN cannot take (left to the kernel,
which then runs in place on the call's output), relu after, channels-last and non-contiguous inputs, NaN
and inf, PT2_DISABLE=epilogue; then libpt2rt's entries directly on strided views (a gappy y, a broadcast
addend that sends bf16 through the f32 route, no input channels)."""
import ctypes

import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import make
from rt_ctypes import descriptor, rt_library

HALF = [torch.bfloat16, torch.float16]
NAME = {torch.bfloat16: "bf16", torch.float16: "f16"}
EPS = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}  # the spacing of values in [1, 2)


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def exact_conv(x, w, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(x.double(), w.double(), stride=stride, padding=padding, dilation=dilation, groups=groups)


def check_rounded_once(got, exact, dt):
    """got is exact rounded once to dt, up to the f32 accumulation moving a value across a tie: within one
    spacing everywhere, and equal on nearly every element."""
    assert got.dtype == dt
    want = exact.to(dt)
    torch.testing.assert_close(got.double(), exact, rtol=EPS[dt], atol=1e-3)
    same = (got == want) | (got.isnan() & want.isnan())
    assert same.double().mean().item() > 0.99, f"{(~same).sum().item()} of {same.numel()} differ from one rounding"


# (label, x shape, w shape, stride, padding, dilation, groups)
FORMS = [
    ("3x3 pad1", (2, 16, 9, 11), (32, 16, 3, 3), 1, 1, 1, 1),
    ("stride2 odd channels", (1, 5, 11, 10), (7, 5, 3, 3), 2, 1, 1, 1),
    ("dilated, uneven", (1, 16, 13, 9), (16, 16, 3, 3), (1, 2), (2, 0), (2, 1), 1),
    ("groups4", (2, 32, 8, 8), (64, 8, 3, 3), 1, 1, 1, 4),
    ("depthwise", (2, 24, 9, 9), (24, 1, 3, 3), 1, 1, 1, 24),
    ("1x1", (2, 64, 7, 7), (48, 64, 1, 1), 1, 0, 1, 1),
    ("7x7 stride2 3 channels", (1, 3, 23, 23), (16, 3, 7, 7), 2, 3, 1, 1),
]


@pytest.mark.parametrize("dt", HALF, ids=lambda d: NAME[d])
@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
@pytest.mark.parametrize("epilogue", ["none", "bias", "bias+residual", "residual"])
def test_rounded_once(form, dt, epilogue):
    label, xs, ws, stride, padding, dilation, groups = form
    x, w = make(xs, dt, -1, 1, seed=1), make(ws, dt, -1, 1, seed=2)
    b = make((ws[0],), dt, -1, 1, seed=3) if "bias" in epilogue else None
    y_shape = F.conv2d(x.float(), w.float(), stride=stride, padding=padding, dilation=dilation, groups=groups).shape
    r = make(y_shape, dt, -1, 1, seed=4)

    def fn(x, w, r):
        y = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return y + r if "residual" in epilogue else y

    with torch.no_grad():
        got = pt2.compile(fn)(x, w, r)
    exact = exact_conv(x, w, stride, padding, dilation, groups)
    if b is not None:
        exact = exact + b.double().view(1, -1, 1, 1)
    if "residual" in epilogue:
        exact = exact + r.double()
    check_rounded_once(got, exact, dt)
    # eager rounds the conv (with its bias) and then the residual's add: within two roundings
    torch.testing.assert_close(got.double(), fn(x, w, r).double(), rtol=2 * EPS[dt], atol=2 * EPS[dt])


@pytest.mark.parametrize("dt", HALF, ids=lambda d: NAME[d])
def test_addend_onednn_cannot_take_stays_a_kernel(dt):
    """An addend broadcast over the channels (a [H, W] plane) is neither oneDNN's bias nor its sum: the bf16
    call writes the rounded conv and the kernel adds in place on it (rounding twice, as eager); f16 takes it."""
    x, w = make((2, 8, 10, 12), dt, -1, 1, seed=5), make((16, 8, 3, 3), dt, -1, 1, seed=6)
    plane = make((10, 12), dt, -1, 1, seed=7)
    fn = lambda x, w, p: torch.relu(F.conv2d(x, w, padding=1) + p)  # noqa: E731
    with torch.no_grad():
        got = pt2.compile(fn)(x, w, plane)
    exact = (exact_conv(x, w, padding=1).to(dt).double() + plane.double()).relu()
    if dt == torch.float16:
        exact = (exact_conv(x, w, padding=1) + plane.double()).relu()
    check_rounded_once(got, exact, dt)


@pytest.mark.parametrize("dt", HALF, ids=lambda d: NAME[d])
def test_relu_after_and_layouts(dt):
    """relu stays a kernel (oneDNN's turns NaN into 0), in place on the call's output; a channels-last x and
    a non-contiguous one; NaN and inf in x reach the outputs eager's do."""
    x = make((2, 16, 10, 10), dt, -1, 1, seed=8).contiguous(memory_format=torch.channels_last)
    x[0, 3, 4, 5] = float("nan")
    x[1, 0, 0, 0] = float("inf")
    w, b = make((24, 16, 3, 3), dt, -1, 1, seed=9), make((24,), dt, -1, 1, seed=10)
    xt = make((2, 16, 10, 10), dt, -1, 1, seed=11, noncontiguous=True)
    fn = lambda x, xt, w, b: (torch.relu(F.conv2d(x, w, b, padding=1)), F.conv2d(xt, w, b, stride=2))  # noqa: E731
    with torch.no_grad():
        got = pt2.compile(fn)(x, xt, w, b)
    want = fn(x, xt, w, b)
    assert torch.equal(got[0].isnan(), want[0].isnan()) and torch.equal(got[0].isinf(), want[0].isinf())
    finite = want[0].isfinite()
    exact = (exact_conv(x, w, padding=1) + b.double().view(1, -1, 1, 1)).relu()
    check_rounded_once(got[0][finite], exact[finite], dt)
    check_rounded_once(got[1], exact_conv(xt, w, stride=2) + b.double().view(1, -1, 1, 1), dt)


@pytest.mark.parametrize("dt", HALF, ids=lambda d: NAME[d])
def test_without_epilogues_the_same_values(dt, monkeypatch):
    """PT2_DISABLE=epilogue: the f32 accumulator rounded by a kernel, and the bias added after (twice rounded)."""
    x, w, b = make((1, 8, 9, 9), dt, -1, 1, seed=12), make((8, 8, 3, 3), dt, -1, 1, seed=13), make((8,), dt, -1, 1, seed=14)
    fn = lambda x, w, b: F.conv2d(x, w, b, padding=1)  # noqa: E731
    with torch.no_grad():
        folded = pt2.compile(fn)(x, w, b)
        pt2.reset()
        monkeypatch.setenv("PT2_DISABLE", "epilogue")
        kernels = pt2.compile(fn)(x, w, b)
    exact = exact_conv(x, w, padding=1) + b.double().view(1, -1, 1, 1)
    check_rounded_once(folded, exact, dt)
    torch.testing.assert_close(kernels.double(), exact, rtol=2 * EPS[dt], atol=2e-3)


# --- libpt2rt directly ------------------------------------------------------


def rt_round(x, w, y, addends=(), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    fn = getattr(ctypes.CDLL(rt_library()), "_mlir_ciface_pt2rt_conv2d_round_" + NAME[y.dtype])
    tensors = [x, w, y, addends[0] if addends else y, addends[1] if len(addends) > 1 else y]
    keep = [descriptor(t) for t in tensors]
    steps = sum((1 + k) << (4 * k) for k in range(len(addends)))  # ADD0, then ADD1
    geometry = [*stride, *padding, *dilation, groups, steps]
    fn(*[ctypes.byref(u) for _, u in keep], *[ctypes.c_int64(v) for v in geometry])


@pytest.mark.parametrize("dt", HALF, ids=lambda d: NAME[d])
@pytest.mark.parametrize("addends", ["none", "bias", "bias+full", "plane"])
def test_runtime_gappy_y(dt, addends):
    """y every other channel of a wider buffer (the rest untouched); a per-channel bias and a full addend
    (oneDNN's bias and sum), or a [H, W] plane (bf16 then through the f32 route)."""
    x, w = make((2, 6, 9, 7), dt, -1, 1, seed=15), make((8, 3, 3, 2), dt, -1, 1, seed=16)
    exact = exact_conv(x, w, stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2)
    n, c, h, wd = exact.shape
    adds = []
    if "bias" in addends:
        bias = make((c,), dt, -1, 1, seed=17)
        adds.append(bias.view(1, c, 1, 1).expand(n, c, h, wd))
    if "full" in addends:
        adds.append(make(exact.shape, dt, -1, 1, seed=18))
    if addends == "plane":
        adds.append(make((h, wd), dt, -1, 1, seed=19).expand(n, c, h, wd))
    for a in adds:
        exact = exact + a.double()
    wide = torch.full((n, 2 * c, h, wd + 3), 7.0, dtype=dt)
    y = wide[:, ::2, :, 1:-2]
    rt_round(x, w, y, adds, stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2)
    check_rounded_once(y, exact, dt)
    untouched = torch.ones_like(wide, dtype=torch.bool)
    untouched[:, ::2, :, 1:-2] = False
    assert (wide[untouched] == 7).all()


@pytest.mark.parametrize("dt", HALF, ids=lambda d: NAME[d])
def test_runtime_no_input_channels(dt):
    """Empty sums: y is the bias, rounded."""
    bias = make((3,), dt, -1, 1, seed=20).view(1, 3, 1, 1).expand(1, 3, 2, 2)
    y = torch.full((1, 3, 2, 2), 7.0, dtype=dt)
    rt_round(torch.empty(1, 0, 4, 4, dtype=dt), torch.empty(3, 0, 3, 3, dtype=dt), y, [bias])
    assert torch.equal(y, bias)
