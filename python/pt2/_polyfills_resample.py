"""Python forms of torch's resampling C ops, which pt2's capture traces in their place (capture/polyfills.c,
and F.pad's rule in capture/rules_nn.c): interpolate's kernels and F.pad's reflect, replicate and circular
modes, each an index_select along each spatial dimension of indices (and weights) computed as ATen's
UpSample.h and padding kernels compute them; and the transposed convolutions, a convolution of the input
spread out by the stride.  Nothing here runs in eager.
"""
import torch

from ._polyfills_sort import _SCALAR_TYPE

# --- interpolate's kernels (nearest, nearest-exact, linear, bilinear, trilinear, bicubic): each spatial
# dimension in turn, the last len(output size) dimensions -------------------------------------------

def _output_size(size, output_size, scale_factors, i):
    return output_size[i] if output_size is not None else int(size * scale_factors[i])


def _scale(size, out, scale_factors, i):
    """compute_scales_value: 1 / the scale factor when one is given, else in / out."""
    if scale_factors is not None and scale_factors[i] > 0:
        return 1.0 / scale_factors[i]
    return size / out


def _spatial_dims(input, output_size, scale_factors):
    k = len(output_size) if output_size is not None else len(scale_factors)
    return range(input.dim() - k, input.dim())


def _check_dtype(input, kind):
    """ATen's upsample kernels take floating types and uint8 (others: NotImplementedError, as eager)."""
    if not input.dtype.is_floating_point and input.dtype != torch.uint8:
        n = input.dim() - 2
        raise NotImplementedError(f'"upsample_{kind}{n}d_out_frame" not implemented for '
                                  f"'{_SCALAR_TYPE.get(input.dtype, input.dtype)}'")


def _nearest(input, output_size, scale_factors, offset):
    """The source of output index i is min(floor((i + offset) * scale), in - 1), in float32 as ATen
    computes it (offset 0: nearest, 0.5: nearest-exact).  ATen's kernels of nearest take i itself
    where a dimension keeps its size, whatever the scale factor given (1.1 for 4 -> 4), and on the
    CPU (nearest_idx) i >> 1 where it doubles (2.2 for 4 -> 8; CUDA applies the scale)."""
    _check_dtype(input, "nearest")
    x = input
    cpu = input.device.type == "cpu"
    for i, dim in enumerate(_spatial_dims(input, output_size, scale_factors)):
        size = x.shape[dim]
        out = _output_size(size, output_size, scale_factors, i)
        dst = torch.arange(out, device=x.device)
        if offset == 0.0 and out == size:
            continue
        if cpu and offset == 0.0 and out == 2 * size:
            x = x.index_select(dim, dst // 2)
            continue
        src = ((dst.to(torch.float32) + offset) * _scale(size, out, scale_factors, i)).floor()
        x = x.index_select(dim, src.clamp_max(size - 1).long())
    return x


def upsample_nearest(input, output_size, scale_factors):
    """torch._C._nn.upsample_nearest1d / 2d / 3d(input, output_size, scale_factors)."""
    return _nearest(input, output_size, scale_factors, 0.0)


def upsample_nearest_exact(input, output_size, scale_factors):
    """torch._C._nn._upsample_nearest_exact1d / 2d / 3d: the pixel centres', floor((i + 0.5) * scale)."""
    return _nearest(input, output_size, scale_factors, 0.5)


def _source_index(x, dim, size, out, align_corners, scale_factors, i, cubic):
    """ATen's area_pixel_compute_source_index over the output indices of `dim`, in x's (float) type:
    i · (in - 1) / (out - 1) with align_corners (its given scale ignored), else (i + 0.5) · scale - 0.5,
    at least 0 unless cubic."""
    dst = torch.arange(out, dtype=x.dtype, device=x.device)
    if align_corners:
        return dst * ((size - 1) / (out - 1) if out > 1 else 0.0)
    src = (dst + 0.5) * _scale(size, out, scale_factors, i) - 0.5
    return src if cubic else src.clamp_min(0.0)


def _weights_along(w, dim, ndim):
    return w.reshape((-1,) + (1,) * (ndim - 1 - dim))


def _taps(input, output_size, align_corners, scale_factors, cubic, weights):
    """Each spatial dimension in turn: the source index s of every output index (cubic: not clamped
    below 0), and the sum over taps k of x[clamp(floor(s) + offset_k)] · w_k(s - floor(s)), for the
    (offset, weight) pairs weights(t) gives; in float32 (float64 for float64 inputs), as ATen's
    opmath."""
    _check_dtype(input, "bicubic" if cubic else "linear")
    dt = torch.float64 if input.dtype == torch.float64 else torch.float32
    dims = _spatial_dims(input, output_size, scale_factors)
    outs = [_output_size(input.shape[dim], output_size, scale_factors, i) for i, dim in enumerate(dims)]
    if not cubic and input.device.type != "cpu" and all(o == input.shape[d] for o, d in zip(outs, dims)):
        return input.clone()  # ATen's CUDA linear kernels: no dimension resized, a copy
    x = input.to(dt)
    for i, dim in enumerate(dims):
        size, out = x.shape[dim], outs[i]
        if not cubic and input.device.type == "cpu" and out == size:
            # ATen's CPU linear kernels (compute_source_index_and_lambda): a dimension that keeps its
            # size reads x[i] with weight 1 and again with weight 0, whatever the scale (inf * 0: NaN)
            x = x * 1.0 + x * 0.0
            continue
        src = _source_index(x, dim, size, out, align_corners, scale_factors, i, cubic)
        i0 = src.floor()
        t = src - i0
        i0 = i0.long()
        y = None
        for offset, w in weights(t):
            term = x.index_select(dim, (i0 + offset).clamp(0, size - 1)) * _weights_along(w, dim, x.dim())
            y = term if y is None else y + term
        x = y
    return x.to(input.dtype)


def upsample_linear(input, output_size, align_corners, scale_factors):
    """torch._C._nn.upsample_linear1d / upsample_bilinear2d / upsample_trilinear3d(input, output_size,
    align_corners, scale_factors): each output index reads source indices i0 = floor(s) and
    min(i0 + 1, in - 1) with weights 1 - λ and λ (λ = s - i0)."""
    return _taps(input, output_size, align_corners, scale_factors, False, lambda t: ((0, 1.0 - t), (1, t)))


def upsample_bicubic2d(input, output_size, align_corners, scale_factors):
    """torch._C._nn.upsample_bicubic2d(input, output_size, align_corners, scale_factors): Keys' cubic
    convolution (A = -0.75) over the four source indices floor(s) - 1 .. floor(s) + 2, clamped to the
    edges, s unclamped below 0, with ATen's weights (get_cubic_upsample_coefficients)."""
    a = -0.75
    near = lambda d: ((a + 2) * d - (a + 3)) * d * d + 1  # cubic_convolution1, |d| <= 1
    far = lambda d: ((a * d - 5 * a) * d + 8 * a) * d - 4 * a  # cubic_convolution2, 1 < |d| < 2
    return _taps(input, output_size, align_corners, scale_factors, True,
                 lambda t: ((-1, far(t + 1)), (0, near(t)), (1, near(1 - t)), (2, far(2 - t))))


# --- F.pad's index modes -----------------------------------------------------------------------

def pad_indexed(input, pad, mode="constant", value=None):
    """F.pad's reflect, replicate and circular modes: an index_select along each padded dim (the last
    len(pad) / 2, the last dim first) of indices i in [-left, size + right): reflect |i| mirrored at
    both ends without repeating the edge, replicate i clamped, circular i mod size; eager's checks."""
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    n = len(pad) // 2
    if len(pad) % 2 == 0 and len(pad) <= 2 * input.dim() and not (1 <= n <= 3 and input.dim() in (n + 1, n + 2)):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    x = input
    for i in range(len(pad) // 2):
        dim = x.dim() - 1 - i
        left, right, size = pad[2 * i], pad[2 * i + 1], x.shape[dim]
        if mode == "reflect" and (left >= size or right >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({left}, {right}) at dimension {dim} of input {list(input.shape)}")
        if mode == "circular" and (left > size or right > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "circular" and (left < 0 or right < 0):
            # a negative pad crops first; the other end wraps around what is left (ATen's _pad_circular)
            lo, hi = max(-left, 0), max(-right, 0)
            x = x.narrow(dim, lo, size - lo - hi)
            left, right, size = max(left, 0), max(right, 0), size - lo - hi
        idx = torch.arange(-left, size + right, device=x.device)
        if mode == "reflect":
            idx = (size - 1) - ((size - 1) - idx.abs()).abs()
        elif mode == "replicate":
            idx = idx.clamp(0, size - 1)
        else:
            idx = torch.remainder(idx, size)
        x = x.index_select(dim, idx)
    return x


# --- transposed convolutions: the convolution of the input spread out by the stride -------------------

def _spread(x, dim, s):
    """Puts s - 1 zeros between consecutive elements of x along dim: [.., L, ..] -> [.., (L - 1)·s + 1, ..]."""
    if s == 1:
        return x
    n = x.shape[dim]
    y = torch.nn.functional.pad(x.unsqueeze(dim + 1), (0, 0) * (x.dim() - dim - 1) + (0, s - 1))
    return y.flatten(dim, dim + 1).narrow(dim, 0, (n - 1) * s + 1)


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, nsp):
    """conv_transpose{1,2,3}d as ATen defines it: y[i] = Σ x[j] · w[k] over i = j·stride - padding + k·dilation.
    That is a convolution (stride 1) of x spread out by the stride, padded by dilation·(k - 1) - padding
    on each side (output_padding more on the right; cropped where negative), with the weight's in and
    out channels swapped within each group and its taps reversed."""
    def tup(v):
        return tuple(v) * (nsp // len(v)) if isinstance(v, (tuple, list)) else (v,) * nsp

    stride, padding, output_padding, dilation = tup(stride), tup(padding), tup(output_padding), tup(dilation)
    for i in range(nsp):
        if output_padding[i] >= stride[i] and output_padding[i] >= dilation[i]:
            raise RuntimeError("output padding must be smaller than either stride or dilation, but got output_padding_"
                               f"{'hwd'[i] if nsp > 1 else 'w'}: {output_padding[i]} stride: {stride[i]} dilation: {dilation[i]}")
    unbatched = input.dim() == nsp + 1
    x = input.unsqueeze(0) if unbatched else input
    c_in, c_out_g = weight.shape[0], weight.shape[1]
    k = weight.shape[2:]
    w = weight.reshape(groups, c_in // groups, c_out_g, *k).transpose(1, 2).reshape(groups * c_out_g, c_in // groups, *k)
    w = w.flip(list(range(2, 2 + nsp)))
    for i in range(nsp):
        d = 2 + i
        x = _spread(x, d, stride[i])
        lo = dilation[i] * (k[i] - 1) - padding[i]
        hi = lo + output_padding[i]
        if lo < 0 or hi < 0:  # crop what the padding takes away
            length = x.shape[d]
            x = x.narrow(d, max(-lo, 0), length - max(-lo, 0) - max(-hi, 0))
        if lo > 0 or hi > 0:
            pads = [0, 0] * (nsp - 1 - i) + [max(lo, 0), max(hi, 0)]
            x = torch.nn.functional.pad(x, pads)
    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nsp]
    y = conv(x, w, bias, 1, 0, dilation, groups)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3)


# --- 3-d convolutions: 2-d ones over the depth taps ----------------------------------------------------

def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv3d as a sum over the weight's depth taps of 2-d convolutions: tap t reads the padded input's
    depths t·dilation, t·dilation + stride, ... (one a result depth), folded into the batch, with the
    weight's slice t.  capture/polyfills.c (conv3d_ok) leaves what eager raises for to the C op."""
    def triple(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,) * 3

    stride, dilation, k = triple(stride), triple(dilation), weight.shape[2:]
    if isinstance(padding, str):
        total = [dilation[i] * (k[i] - 1) if padding == "same" else 0 for i in range(3)]
        lo = [t // 2 for t in total]
        hi = [t - lo[i] for i, t in enumerate(total)]
    else:
        lo = hi = list(triple(padding))
    unbatched = input.dim() == 4
    x = input.unsqueeze(0) if unbatched else input
    half = x.dtype in (torch.float16, torch.bfloat16)
    if half:  # the taps summed in f32 and rounded once, as eager's kernel accumulates
        x, weight, bias = x.float(), weight.float(), None if bias is None else bias.float()
    if any(lo) or any(hi):
        x = torch.nn.functional.pad(x, (lo[2], hi[2], lo[1], hi[1], lo[0], hi[0]))
    n, c, depth, h, w = x.shape
    d_out = (depth - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    y = None
    for t in range(k[0]):
        start = t * dilation[0]
        taps = x[:, :, start:start + (d_out - 1) * stride[0] + 1:stride[0]].transpose(1, 2).reshape(n * d_out, c, h, w)
        part = torch.nn.functional.conv2d(taps, weight[:, :, t], None, stride[1:], 0, dilation[1:], groups)
        y = part if y is None else y + part
    y = y.reshape(n, d_out, *y.shape[1:]).transpose(1, 2)
    if bias is not None:
        y = y + bias.reshape(-1, 1, 1, 1)
    y = y.contiguous()  # eager's layout
    if half:
        y = y.to(input.dtype)
    return y.squeeze(0) if unbatched else y


# --- grid_sample's kernels (torch.grid_sampler, grid_sampler_2d / _3d): ATen's GridSampler.h, each
# output point's taps gathered from the input flattened over its spatial dims ---------------------------

_BICUBIC_A = -0.75


def _grid_unnormalize(coord, size, align_corners):
    """grid_sampler_unnormalize: [-1, 1] to pixel coordinates (corner pixels' centers, or their edges)."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _grid_reflect(coord, twice_low, twice_high):
    """reflect_coordinates: coord reflected about the bounds until it lies within them."""
    if twice_low == twice_high:
        return torch.zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = torch.abs(coord - low)
    extra = torch.fmod(coord, span)
    flips = torch.floor(coord / span)
    return torch.where(torch.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _grid_pad(coord, size, padding_mode, align_corners):
    """compute_coordinates: border clips to the image, reflection reflects then clips; zeros leaves it."""
    if padding_mode == 1:
        return torch.clamp(coord, 0, size - 1)
    if padding_mode == 2:
        coord = _grid_reflect(coord, 0, 2 * (size - 1)) if align_corners else _grid_reflect(coord, -1, 2 * size - 1)
        return torch.clamp(coord, 0, size - 1)
    return coord


def _cubic_weights(t):
    """get_cubic_upsample_coefficients (A = -0.75) of the fraction t, for the taps at -1, 0, 1, 2."""
    a = _BICUBIC_A

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return far(t + 1), near(t), near(1 - t), far(2 - t)


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler (F.grid_sample), grid_sampler_2d and _3d: input [N, C, (D,) H, W] sampled at grid
    [N, (Do,) Ho, Wo, k] (x, y(, z) in [-1, 1]); modes 0 bilinear (trilinear), 1 nearest (half to even),
    2 bicubic (2-d); padding 0 zeros (taps outside read 0), 1 border, 2 reflection; float32 and float64
    (capture/polyfills.c, grid_sampler_ok)."""
    k = grid.shape[-1]
    sizes = list(reversed(input.shape[2:]))  # W, H(, D): grid's coordinate order
    n, c = input.shape[0], input.shape[1]
    out_shape = grid.shape[1:-1]
    flat = input.reshape(n, c, -1)
    steps = [1]
    for s in sizes[:-1]:
        steps.append(steps[-1] * s)
    coords = [_grid_unnormalize(grid[..., d], sizes[d], align_corners) for d in range(k)]

    def tap(points):
        """input at integer-valued coordinates (one tensor a dim), 0 outside the image: [N, C, *out]."""
        inside, lin = None, 0
        for d, p in enumerate(points):
            ok = (p >= 0) & (p <= sizes[d] - 1)
            inside = ok if inside is None else inside & ok
        for d, p in enumerate(points):
            lin = lin + torch.where(inside, p, 0).to(torch.int64) * steps[d]
        v = torch.gather(flat, 2, lin.reshape(n, 1, -1).expand(n, c, -1)).reshape(n, c, *out_shape)
        return torch.where(inside.unsqueeze(1), v, 0)

    if interpolation_mode == 2:  # bicubic: the padding applies to each tap's own coordinates
        x, y = coords
        x0, y0 = torch.floor(x), torch.floor(y)
        wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)
        out = 0
        for j in range(4):
            yj = _grid_pad(y0 + (j - 1), sizes[1], padding_mode, align_corners)
            row = 0
            for i in range(4):
                xi = _grid_pad(x0 + (i - 1), sizes[0], padding_mode, align_corners)
                row = row + tap([xi, yj]) * wx[i].unsqueeze(1)
            out = out + row * wy[j].unsqueeze(1)
        return out
    coords = [_grid_pad(coords[d], sizes[d], padding_mode, align_corners) for d in range(k)]
    if interpolation_mode == 1:
        return tap([torch.round(p) for p in coords])
    lows = [torch.floor(p) for p in coords]
    fracs = [p - lo for p, lo in zip(coords, lows)]
    out = 0
    for corner in range(1 << k):
        points, weight = [], None
        for d in range(k):
            high = corner >> d & 1
            points.append(lows[d] + high)
            w = fracs[d] if high else 1 - fracs[d]
            weight = w if weight is None else weight * w
        out = out + tap(points) * weight.unsqueeze(1)
    return out


def _affine_steps(n, align_corners, like):
    """linspace_from_neg_one: n points over [-1, 1], pulled in to the pixel centers without align_corners."""
    if n <= 1:
        return torch.zeros(1, dtype=like.dtype, device=like.device)
    r = torch.linspace(-1, 1, n, dtype=like.dtype, device=like.device)
    return r if align_corners else r * (n - 1) / n


def affine_grid_generator(theta, size, align_corners):
    """torch.affine_grid_generator (F.affine_grid): the base grid (x, y(, z), 1) of every output pixel,
    multiplied by theta^T ([N, 2, 3] for 4-d sizes, [N, 3, 4] for 5-d) as ATen's bmm of the flattened grid."""
    if len(size) == 4:
        n, _, h, w = size
        xs, ys = _affine_steps(w, align_corners, theta), _affine_steps(h, align_corners, theta)
        ones = torch.ones(h, w, dtype=theta.dtype, device=theta.device)
        base = torch.stack([xs.view(1, -1).expand(h, w), ys.view(-1, 1).expand(h, w), ones], -1)
        return torch.matmul(base.reshape(1, h * w, 3), theta.transpose(1, 2)).reshape(n, h, w, 2)
    n, _, d, h, w = size
    xs, ys, zs = (_affine_steps(k, align_corners, theta) for k in (w, h, d))
    ones = torch.ones(d, h, w, dtype=theta.dtype, device=theta.device)
    base = torch.stack([xs.view(1, 1, -1).expand(d, h, w), ys.view(1, -1, 1).expand(d, h, w),
                        zs.view(-1, 1, 1).expand(d, h, w), ones], -1)
    return torch.matmul(base.reshape(1, d * h * w, 4), theta.transpose(1, 2)).reshape(n, d, h, w, 3)
