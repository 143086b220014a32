"""A Python number or a 0-d tensor meeting an f16/bf16 tensor: eager's kernels read some of these
scalars in f32 and others rounded to the half type, and the devices differ (dialects/builder.c's
opmath_scalar, docs/dialect.md "Scalars of f16/bf16 ops").  pt2 follows the device's eager kernels
bit for bit; before, every scalar was rounded to the half type (`x_bf16 * 0.3` multiplied by
0.30078125, where eager multiplies by 0.3f and rounds once: half the elements one ulp off)."""
import pytest
import torch

import pt2

FORMS = {
    "x + s": lambda x, s, t: x + s, "s + x": lambda x, s, t: s + x, "x - s": lambda x, s, t: x - s,
    "s - x": lambda x, s, t: s - x, "x * s": lambda x, s, t: x * s, "s * x": lambda x, s, t: s * x,
    "x / s": lambda x, s, t: x / s, "s / x": lambda x, s, t: s / x, "x // s": lambda x, s, t: x // s,
    "x % s": lambda x, s, t: x % s, "x > s": lambda x, s, t: x > s, "torch.mul": lambda x, s, t: torch.mul(x, s),
    "mul_": lambda x, s, t: x.clone().mul_(s), "div_": lambda x, s, t: x.clone().div_(s),
    "x * t": lambda x, s, t: x * t, "t * x": lambda x, s, t: t * x, "x / t": lambda x, s, t: x / t,
    "x // t": lambda x, s, t: x // t, "x + t": lambda x, s, t: x + t, "x * t64": lambda x, s, t: x * t.double(),
    "chain": lambda x, s, t: (x * s + s) / s - 1.7,
}


def _differences(got, want):
    assert got.dtype == want.dtype
    g, w = got.double(), want.double()
    return int(((g != w) & ~(g.isnan() & w.isnan())).sum())


def unlike_eager(x, s):
    """{form: elements unlike eager's} for x meeting the number s (and a 0-d tensor of it on x's
    device) in every form, each compiled afresh."""
    t = torch.tensor(float(s), device=x.device)
    bad = {}
    for name, form in FORMS.items():
        pt2.reset()
        got = pt2.compile(lambda x, t, form=form: form(x, s, t))(x, t)
        n = _differences(got, form(x, s, t))
        if n:
            bad[name] = n
    return bad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("s", [0.3, 1 / 3, 7.1, 2.0, 1000003])
def test_scalar_operands_as_eager(dtype, s):
    """Bit for bit against eager on the CPU, every form, a non-contiguous odd-sized input."""
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(2 * 1501, generator=g, dtype=torch.float64) * 10).to(dtype)[::2]
    bad = unlike_eager(x, s)
    assert not bad, f"elements unlike eager's: {bad}"


def test_integer_tensor_with_numbers():
    x = torch.arange(-40, 41)
    for name, form in {"x / s": lambda x: x / 0.3, "s / x": lambda x: 0.3 / x, "x * s": lambda x: x * 0.3,
                       "s * x": lambda x: 7 * x, "x / 3": lambda x: x / 3}.items():
        pt2.reset()
        assert _differences(pt2.compile(form)(x), form(x)) == 0, name


def _graph_text(dtype, device, build):
    g = pt2.Graph()
    g.set_eager_device(device)
    x = g.input(dtype, (5,))
    g.outputs(build(g, x))
    return g.text()


def test_rules_per_device_in_the_graph():
    """Which ops compute in f32 with an f32 scalar, per device (CUDA's kernels are checked against
    eager CUDA in tests/gpu/test_gpu_capture.py)."""
    add = lambda g, x: g.op("add", x, g.scalar(0.3))  # noqa: E731
    mul = lambda g, x: g.op("mul", x, g.scalar(0.3))  # noqa: E731
    gt = lambda g, x: g.op("gt", x, g.scalar(0.3))  # noqa: E731
    div = lambda g, x: g.op("div", x, g.scalar(0.3))  # noqa: E731
    half_add = "(tensor<5xf32>, tensor<f32>) -> tensor<5xf32>"
    # the CPU's add rounds the number to bf16; CUDA's reads it as f32
    assert "dense<3.007810e-01> : tensor<bf16>" in _graph_text(torch.bfloat16, "cpu", add)
    text = _graph_text(torch.bfloat16, "cuda", add)
    assert '"pt2.add"' in text and half_add in text and "{dtype = bf16}" in text
    # mul reads f32 on both
    for device in ("cpu", "cuda"):
        assert '"pt2.mul"(%1, %0) : (tensor<5xf32>, tensor<f32>)' in _graph_text(torch.bfloat16, device, mul)
    # comparisons round on both
    for device in ("cpu", "cuda"):
        assert "tensor<bf16>" in _graph_text(torch.bfloat16, device, gt)
    # CUDA divides by a number as a product with its f32 reciprocal, f32 tensors too
    text = _graph_text(torch.float32, "cuda", div)
    assert '"pt2.mul"' in text and '"pt2.div"' not in text and "3.33333325" in text
    assert '"pt2.div"' in _graph_text(torch.float32, "cpu", div)
    # a number bf16 holds exactly changes nothing
    text = _graph_text(torch.bfloat16, "cpu", lambda g, x: g.op("mul", x, g.scalar(0.25)))
    assert "f32>" not in text.split("pt2.mul")[1].split("\n")[0]
