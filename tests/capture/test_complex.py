"""Complex tensors as their real pairs (capture/complex.c): torch.fft's results, torch.polar's,
view_as_complex of a real tensor, complex inputs and buffers (a graph input of view_as_real's pairs);
their real and imag parts, views over their dims, operators and methods (pt2.aten ops on the pairs
viewed as complex), in-place writes, complex results handed back, and complex values live at a graph
break, against eager on odd sizes, float32 and float64."""
import pytest
import torch

import pt2
from eager_check import check

torch.manual_seed(0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fnet_mixing_then_layer_norm(dtype):
    ln = torch.nn.LayerNorm(6).to(dtype)

    def f(x):
        return ln(x + torch.fft.fftn(x, dim=(1, 2)).real)

    check(f, torch.randn(3, 7, 6, dtype=dtype), tol=1e-4)


def test_spectra_and_round_trips():
    x = torch.randn(2, 5, 9)
    check(lambda x: torch.fft.rfft(x.relu()).abs() * 2, x, tol=1e-4)
    check(lambda x: torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1]) - x, x, tol=1e-4)
    check(lambda x: torch.fft.ifft(torch.fft.fft(x, dim=1) * 0.5 - 1, dim=1).imag, x, tol=1e-4)
    check(lambda x: torch.fft.rfft(x).angle(), x, tol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_results_handed_back(dtype):
    x = torch.randn(4, 7, dtype=dtype)
    got = check(lambda x: (torch.fft.fft(x + 1), torch.fft.rfft2(x).conj()), x, tol=1e-4)
    assert got[0].dtype == (torch.complex64 if dtype == torch.float32 else torch.complex128)
    check(lambda x: torch.fft.fft(x).transpose(0, 1)[1:5], x, tol=1e-4)


def test_rotary_embedding_as_llama_writes_it():
    def rope(q, angles):
        freqs = torch.polar(torch.ones_like(angles), angles)  # [L, D/2] complex
        qc = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))  # [B, L, H, D/2]
        qc = qc * freqs.unsqueeze(0).unsqueeze(2)
        return torch.view_as_real(qc).flatten(3).type_as(q)

    q, angles = torch.randn(2, 5, 3, 8), torch.randn(5, 4)
    check(rope, q, angles, tol=1e-4)


def test_parts_attributes_and_views():
    def f(x):
        c = torch.fft.fft(x)
        d = c.reshape(-1, 3).permute(1, 0).unsqueeze(0).flatten(1)
        return (c.real, c.imag, (-c).real, c.conj().imag, c.shape, c.dtype, c.ndim, c.size(1), c.dim(),
                c.is_complex(), torch.real(d) + torch.imag(d), c[..., 1:3].real, c[0].imag, (c + c.real).imag,
                (2 - c).real, (c * 3).imag)

    check(f, torch.randn(4, 6), tol=1e-4)


def test_complex_value_live_at_a_break():
    def f(x):
        c = torch.fft.fft(x)
        if x.sum() > 0:  # data-dependent: a break with c live, handed on as view_as_complex of the pairs
            c = c * 2
        return c.real + 1, c

    # the code after the break reads c as a complex input of its own graph
    check(f, torch.randn(3, 5).abs(), tol=1e-4, graphs=2, breaks=1)


def test_in_place_writes_reach_every_alias():
    def ops(x):
        c = torch.fft.fft(x)
        d = c
        c *= 2
        c += 1
        return d.real, c.imag

    def through_views(x):
        c = torch.fft.fft(x)
        c.real.mul_(2)
        v = c[0]
        v -= 1
        return c

    check(ops, torch.randn(3, 4), tol=1e-4)
    check(through_views, torch.randn(3, 4), tol=1e-4)


class Rotary(torch.nn.Module):
    """Meta's LLaMA rotary embedding: a complex buffer of frequencies, sliced at a start position."""

    def __init__(self, dim=8, max_len=16):
        super().__init__()
        ang = torch.outer(torch.arange(max_len).float(), 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(ang), ang), persistent=False)

    def forward(self, q, start):
        f = self.freqs_cis[start:start + q.shape[1]]
        qc = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        return torch.view_as_real(qc * f[None, :, None, :]).flatten(3).type_as(q)


def test_complex_tensors_from_outside():
    check(Rotary(), torch.randn(2, 5, 3, 8), 3, tol=1e-5)
    f = lambda z: (z * 2).real + z.imag.abs()  # noqa: E731
    check(f, torch.randn(3, 5, dtype=torch.complex64))
    check(f, torch.randn(3, 5, dtype=torch.complex128))
    check(lambda z: torch.fft.ifft(z).real, torch.randn(4, 6, dtype=torch.complex64), tol=1e-5)
    # a conjugate view cannot be read as pairs: eager runs it (the guard fails for it, the retrace breaks)
    z = torch.randn(3, 5, dtype=torch.complex64)
    cf = pt2.compile(f)
    torch.testing.assert_close(cf(z), f(z))
    torch.testing.assert_close(cf(z.conj()), f(z.conj()))
    assert "conjugate view" in pt2.explain(f)(z.conj()).break_reasons[0].reason


def test_in_place_into_a_complex_input():
    def f(z, x):
        z *= x
        z.imag.add_(1)
        return z

    z, x = torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4)
    want = f(z.clone(), x)
    got_z = z.clone()
    got = pt2.compile(f)(got_z, x)
    torch.testing.assert_close(got_z, want)
    torch.testing.assert_close(got, want)
    assert got is got_z  # the caller's own tensor, as eager returns it


def test_complex_input_returned_is_the_same_object():
    def f(z, x):
        return z, z.real * x, [z]

    def g(z, x):
        y = (z * x).real
        print("a break")  # z live across it: the caller's tensor again, not a new view of its pairs
        return z, y + 1

    z, x = torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4)
    got = pt2.compile(f)(z, x)
    assert got[0] is z and got[2][0] is z
    torch.testing.assert_close(got[1], z.real * x)
    got = pt2.compile(g)(z, x)
    assert got[0] is z
    torch.testing.assert_close(got[1], (z * x).real + 1)


def test_view_as_complex_checks_eager_s_layout():
    f = pt2.compile(lambda x: torch.view_as_complex(x.t()).real)
    with pytest.raises(RuntimeError, match="last dimension with stride 1"):
        f(torch.randn(2, 6))
    check(lambda x: torch.view_as_complex(x.t().contiguous() * 2).imag, torch.randn(2, 6))


def test_aten_ops_called_themselves():
    # torch.ops.aten ops torch has no function or Tensor method for: the op itself as one pt2.aten
    x = torch.randn(4, 7)
    check(lambda x: torch.ops.aten._safe_softmax.default(x, 1) + 1, x)
    check(lambda x: torch.ops.aten._softmax_backward_data(x.softmax(1), x.softmax(1), 1, torch.float32) * 2, x)
    check(lambda x: torch.ops.aten.native_dropout_backward.default(x, x > 0, 2.0) + 1, x)


def test_python_complex_numbers():
    x = torch.randn(4, 6)
    check(lambda x: torch.exp(1j * x).real * 2, x, tol=1e-5)
    check(lambda x: (x * (2 + 3j)).imag - (torch.fft.fft(x) - 1j).abs(), x, tol=1e-4)
