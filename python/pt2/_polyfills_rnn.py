"""Python forms of torch's recurrent C ops (torch._VF.lstm / gru / rnn_tanh / rnn_relu), traced by pt2's
capture in their place (capture/polyfills.c), so that nn.LSTM, nn.GRU and nn.RNN compile into a graph.

Only the overload of a padded input tensor (`input, hx, params, has_biases, num_layers, dropout, train,
bidirectional, batch_first`); polyfills.c leaves the PackedSequence overload, and dropout between layers
in training mode, to the C op (a break).  The recurrence is unrolled over the sequence length, known at
trace time.  The math is ATen's (aten/src/ATen/native/RNN.cpp): on the CPU each layer's input
projection is one product over the whole sequence, then per step the hidden product is added to it;
LSTM gates i, f, g, o, c' = f·c + i·g, h' = o·tanh(c') (then h'·W_hrᵀ with a projection); GRU gates
r, z, n with n = tanh(x_n + r·(W_hn h + b_hn)), h' = (h − n)·z + n; RNN h' = tanh or relu of the sum.
`params` is the module's `_flat_weights`: per layer, per direction (forward, then reverse),
w_ih, w_hh, then b_ih, b_hh when has_biases, then w_hr for a projected LSTM.
Nothing here runs in eager.
"""
import torch
import torch.nn.functional as F


def _lstm_cell(xw, h, c, w_hh, b_hh, w_hr):
    gates = F.linear(h, w_hh, b_hh) + xw
    i, f, g, o = gates.chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_cell(xw, h, w_hh, b_hh):
    x_r, x_z, x_n = xw.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = torch.sigmoid(h_r + x_r)
    z = torch.sigmoid(h_z + x_z)
    n = torch.tanh(x_n + h_n * r)
    return (h - n) * z + n


def _run(mode, input, hx, params, has_biases, num_layers, bidirectional, batch_first, proj):
    """The layers over a [T, B, I] input (after batch_first's transpose): (output [T, B, D·H'],
    the last states, [L·D, B, *] each, a tuple of one (h) or two (h, c) tensors)."""
    x = input.transpose(0, 1) if batch_first else input
    dirs = 2 if bidirectional else 1
    stride = 2 + (2 if has_biases else 0) + (1 if proj else 0)
    steps = x.shape[0]
    h_n, c_n = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = (layer * dirs + d) * stride
            w_ih, w_hh = params[k], params[k + 1]
            b_ih = params[k + 2] if has_biases else None
            b_hh = params[k + 3] if has_biases else None
            w_hr = params[k + stride - 1] if proj else None
            xw = F.linear(x, w_ih, b_ih).unbind(0)  # every step's input projection in one product
            h = hx[0][layer * dirs + d]
            c = hx[1][layer * dirs + d] if mode == "lstm" else None
            ys = [None] * steps
            for s in range(steps):
                t = steps - 1 - s if d == 1 else s
                if mode == "lstm":
                    h, c = _lstm_cell(xw[t], h, c, w_hh, b_hh, w_hr)
                elif mode == "gru":
                    h = _gru_cell(xw[t], h, w_hh, b_hh)
                else:
                    a = F.linear(h, w_hh, b_hh) + xw[t]
                    h = torch.tanh(a) if mode == "rnn_tanh" else torch.relu(a)
                ys[t] = h
            outs.append(torch.stack(ys, 0))
            h_n.append(h)
            c_n.append(c)
        x = outs[0] if dirs == 1 else torch.cat(outs, -1)
    out = x.transpose(0, 1) if batch_first else x
    if mode == "lstm":
        return out, torch.stack(h_n, 0), torch.stack(c_n, 0)
    return out, torch.stack(h_n, 0)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """torch._VF.lstm(input, (h0, c0), params, ...) -> (output, h_n, c_n); a projection when h0's
    last size differs from c0's (as ATen decides it)."""
    proj = hx[0].shape[-1] != hx[1].shape[-1]
    return _run("lstm", input, hx, params, has_biases, num_layers, bidirectional, batch_first, proj)


def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """torch._VF.gru(input, h0, params, ...) -> (output, h_n)."""
    return _run("gru", input, (hx,), params, has_biases, num_layers, bidirectional, batch_first, False)


def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """torch._VF.rnn_tanh(input, h0, params, ...) -> (output, h_n)."""
    return _run("rnn_tanh", input, (hx,), params, has_biases, num_layers, bidirectional, batch_first, False)


def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """torch._VF.rnn_relu(input, h0, params, ...) -> (output, h_n)."""
    return _run("rnn_relu", input, (hx,), params, has_biases, num_layers, bidirectional, batch_first, False)
