"""Python forms of small torch.nn C ops (capture/polyfills.c): the shrink activations, channel shuffle,
the recurrent cells of nn.LSTMCell / GRUCell / RNNCell, and the feature and alpha dropouts where eager
returns their input.  Each follows ATen's kernel (its dtypes, errors and order of operations); nothing
here runs in eager."""
import torch
import torch.nn.functional as F

from ._polyfills_rnn import _gru_cell, _lstm_cell
from ._polyfills_sort import _SCALAR_TYPE


def _floats_only(name, input):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for \'{_SCALAR_TYPE.get(input.dtype, input.dtype)}\'')


def softshrink(input, lambd=0.5):
    """torch._C._nn.softshrink: x − λ above λ, x + λ below −λ, else x · 0 (signed zeros, NaN kept); a 16-bit
    x is compared and shifted in float32 and rounded once, as the CPU kernel does."""
    _floats_only("softshrink_check", input)
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, 3.40282e+38] for input dtype Float, but found {lambd}")
    x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
    y = torch.where(x > lambd, x - lambd, torch.where(x < -lambd, x + lambd, x * 0))
    return y.to(input.dtype)


def hardshrink(input, lambd=0.5):
    """torch.hardshrink: 0 where −λ ≤ x ≤ λ, with λ in x's own type (the kernel casts it), else x."""
    _floats_only("hardshrink_cpu", input)
    return torch.where((input >= -lambd) & (input <= lambd), 0, input)


def channel_shuffle(input, groups):
    """torch.channel_shuffle: the channels (dim 1) as [groups, C / groups], transposed."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    return input.reshape(n, groups, c // groups, *input.shape[2:]).transpose(1, 2).reshape(input.shape)


def dropout_identity(input, p, train):
    """feature_dropout / alpha_dropout / feature_alpha_dropout not training, or of p 0: the input itself
    (polyfills.c takes no other call)."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    return input


def _check_cell(input, hidden, w_ih, w_hh):
    """ATen's check_rnn_cell_forward_input / _hidden: eager's errors where the shapes disagree (the
    products here would broadcast a batch of one)."""
    if input.shape[1] != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {w_ih.shape[1]}")
    for idx, h in enumerate(hidden):
        if input.shape[0] != h.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{idx} batch size {h.shape[0]}")
        if h.shape[1] != w_hh.shape[1]:
            raise RuntimeError(f"hidden{idx} has inconsistent hidden_size: got {h.shape[1]}, expected {w_hh.shape[1]}")


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch._VF.lstm_cell: (h', c') of one step, gates = W_hh h + b_hh + W_ih x + b_ih (ATen's order)."""
    h, c = hx
    _check_cell(input, (h, c), w_ih, w_hh)
    return _lstm_cell(F.linear(input, w_ih, b_ih), h, c, w_hh, b_hh, None)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _check_cell(input, (hx,), w_ih, w_hh)
    return _gru_cell(F.linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _check_cell(input, (hx,), w_ih, w_hh)
    return torch.tanh(F.linear(hx, w_hh, b_hh) + F.linear(input, w_ih, b_ih))


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _check_cell(input, (hx,), w_ih, w_hh)
    return torch.relu(F.linear(hx, w_hh, b_hh) + F.linear(input, w_ih, b_ih))
