"""Cases for the sampling and spectral operators past opset 17: Resize-18/19
with antialias (and axes, keep_aspect_ratio_policy), GridSample-20/22 on any
spatial rank, DFT-17/20 with every onesided / inverse combination (onesided
with inverse is the inverse real transform), and DeformConv-19/22. Expected
outputs follow each operator's definition in the ONNX specification,
computed with numpy in float64 and rounded to the output type.

Run through tools/make_op_cases.py, which imports this file as a family.
"""
import itertools
import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper


# ---- Resize ----

def _resize_coord(mode, x, scale, in_len, out_len, roi=(0.0, 1.0)):
    """The input coordinate of output coordinate x (coordinate_transformation_mode)."""
    length = scale * in_len  # not rounded, as the spec's reference does
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / length)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        # The spec's formula gives 0 for a length of 1 (its reference code -0.5).
        return (x + 0.5) / scale - 0.5 if length > 1 else 0.0
    if mode == "align_corners":
        return 0.0 if length == 1 else x * (in_len - 1) / (length - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        if length == 1:
            return (roi[1] - roi[0]) * (in_len - 1) / 2 + roi[0] * (in_len - 1)
        return x * (roi[1] - roi[0]) * (in_len - 1) / (length - 1) + roi[0] * (in_len - 1)
    raise ValueError(mode)


def _keys(a, d):
    d = abs(d)
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    if d < 2:
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return 0.0


def _resize_coeffs(mode, ratio, scale, antialias, cubic_a):
    """Filter weights for the taps left of / right of the coordinate, ratio in (0, 1]."""
    if mode == "linear" and not antialias:
        return [1 - ratio, ratio]
    if mode == "cubic" and not antialias:
        return [_keys(cubic_a, ratio + 1), _keys(cubic_a, ratio), _keys(cubic_a, 1 - ratio),
                _keys(cubic_a, 2 - ratio)]
    # Antialias: the kernel stretched by 1 / scale when scale < 1.
    s = min(scale, 1.0)
    support = 1 if mode == "linear" else 2
    start = math.floor(-support / s) + 1
    kern = (lambda d: max(0.0, 1 - abs(d))) if mode == "linear" else (lambda d: _keys(cubic_a, d))
    w = [kern((i - ratio) * s) for i in range(start, 2 - start)]
    total = sum(w)
    return [v / total for v in w]


def _nearest_indices(x, n, lo, hi):
    """The n integers in [lo, hi) nearest to x, ties to the smaller, ascending."""
    return sorted(sorted(range(lo, hi), key=lambda i: (abs(x - i), i))[:n])


def _resize_matrix(mode, coord, in_len, out_len, scale, antialias=False, cubic_a=-0.75,
                   exclude_outside=False, nearest_mode="round_prefer_floor"):
    """out_len x in_len matrix of one dim's interpolation (edge padding folded in)."""
    m = np.zeros((out_len, in_len))
    for o in range(out_len):
        x = _resize_coord(coord, o, scale, in_len, out_len)
        if mode == "nearest":
            f = math.floor(x)
            r = x - f
            if nearest_mode == "round_prefer_floor":
                i = f + (r > 0.5)
            elif nearest_mode == "round_prefer_ceil":
                i = f + (r >= 0.5)
            elif nearest_mode == "floor":
                i = f
            else:
                i = math.ceil(x)
            m[o, min(max(i, 0), in_len - 1)] = 1.0
            continue
        ratio = 1.0 if float(x).is_integer() else x - math.floor(x)
        w = _resize_coeffs(mode, ratio, scale, antialias, cubic_a)
        n = len(w)
        pad = math.ceil(n / 2)
        idx = [i - pad for i in _nearest_indices(x + pad, n, 0, in_len + 2 * pad)]
        if exclude_outside:
            w = [0.0 if (i < 0 or i >= in_len) else v for v, i in zip(w, idx)]
            total = sum(w)
            w = [v / total for v in w]
        for v, i in zip(w, idx):
            m[o, min(max(i, 0), in_len - 1)] += v
    return m


def _resize_ref(x, out_shape, scales, **kw):
    y = x.astype(np.float64)
    for d in range(x.ndim):
        if out_shape[d] == x.shape[d] and scales[d] == 1.0:
            continue
        mat = _resize_matrix(in_len=x.shape[d], out_len=out_shape[d], scale=scales[d], **kw)
        y = np.moveaxis(np.tensordot(mat, np.moveaxis(y, d, 0), axes=(1, 0)), 0, d)
    return y


def resize_cases(out, rng, lib):
    empty = numpy_helper.from_array(np.zeros(0, np.float32), "roi")

    def case(name, opset, x, attrs, scales=None, sizes=None, axes=None):
        ins = ["x", "roi", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
        while ins[-1] == "":
            ins.pop()
        inits = [empty]
        rank = x.ndim
        ax = list(range(rank)) if axes is None else [a % rank for a in axes]
        full = [1.0] * rank
        oshape = list(x.shape)
        if scales is not None:
            sc = np.array(scales, np.float32)
            inits.append(numpy_helper.from_array(sc, "scales"))
            for a, s in zip(ax, sc):
                full[a] = float(s)
                oshape[a] = int(math.floor(x.shape[a] * float(s)))
        else:
            sz = np.array(sizes, np.int64)
            inits.append(numpy_helper.from_array(sz, "sizes"))
            policy = attrs.get("keep_aspect_ratio_policy", "stretch")
            if policy == "stretch":
                for a, s in zip(ax, sz):
                    full[a] = s / x.shape[a]
                    oshape[a] = int(s)
            else:
                pick = min if policy == "not_larger" else max
                s = pick(sz[i] / x.shape[a] for i, a in enumerate(ax))
                for a in ax:
                    full[a] = s
                    oshape[a] = int(math.floor(s * x.shape[a] + 0.5))
        node_attrs = dict(attrs)
        if axes is not None:
            node_attrs["axes"] = axes
        kw = dict(mode=attrs.get("mode", "nearest"),
                  coord=attrs.get("coordinate_transformation_mode", "half_pixel"),
                  antialias=bool(attrs.get("antialias", 0)), cubic_a=attrs.get("cubic_coeff_a", -0.75),
                  exclude_outside=bool(attrs.get("exclude_outside", 0)))
        y = _resize_ref(x, oshape, full, **kw).astype(x.dtype)
        node = helper.make_node("Resize", ins, ["y"], **node_attrs)
        lib.write_case(out, name, opset, node, [("x", x)], [("y", y)], initializers=inits)

    # The specification's own example: 4x4 ramp shrunk by 0.6, whose
    # antialiased answers are 2.875 4.5 9.375 11 (linear).
    ramp = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    case("test_resize_downsample_scales_linear_antialias", 18, ramp,
         {"mode": "linear", "antialias": 1}, scales=[1.0, 1.0, 0.6, 0.6])
    case("test_resize_downsample_scales_cubic_antialias", 18, ramp,
         {"mode": "cubic", "antialias": 1}, scales=[1.0, 1.0, 0.6, 0.6])
    x8 = lib.values(rng, (1, 2, 8, 9), np.float32)
    case("test_resize_antialias_linear_down_scales", 18, x8,
         {"mode": "linear", "antialias": 1}, scales=[1.0, 1.0, 0.5, 0.4])
    case("test_resize_antialias_cubic_down_sizes", 18, x8,
         {"mode": "cubic", "antialias": 1}, sizes=[1, 2, 3, 5])
    # One dim shrinks, one grows: only the shrinking one widens its filter.
    case("test_resize_antialias_linear_mixed", 18, x8,
         {"mode": "linear", "antialias": 1}, scales=[1.0, 1.0, 0.3, 1.7])
    case("test_resize_antialias_cubic_a_exclude_outside", 18, x8,
         {"mode": "cubic", "antialias": 1, "cubic_coeff_a": -0.5, "exclude_outside": 1},
         scales=[1.0, 1.0, 0.6, 0.45])
    case("test_resize_antialias_linear_align_corners", 19, x8,
         {"mode": "linear", "antialias": 1, "coordinate_transformation_mode": "align_corners"},
         sizes=[1, 2, 3, 4])
    case("test_resize_antialias_cubic_asymmetric", 19, x8,
         {"mode": "cubic", "antialias": 1, "coordinate_transformation_mode": "asymmetric"},
         scales=[1.0, 1.0, 0.55, 0.7])
    case("test_resize_antialias_linear_half_pixel_symmetric", 19, x8,
         {"mode": "linear", "antialias": 1, "coordinate_transformation_mode": "half_pixel_symmetric"},
         scales=[1.0, 1.0, 0.35, 0.6])
    case("test_resize_antialias_cubic_pytorch_half_pixel", 18, x8,
         {"mode": "cubic", "antialias": 1, "coordinate_transformation_mode": "pytorch_half_pixel"},
         sizes=[1, 2, 1, 4])
    case("test_resize_antialias_linear_axes_not_larger", 18, x8,
         {"mode": "linear", "antialias": 1, "keep_aspect_ratio_policy": "not_larger"},
         sizes=[3, 5], axes=[2, -1])
    case("test_resize_antialias_cubic_axes_not_smaller", 18, x8,
         {"mode": "cubic", "antialias": 1, "keep_aspect_ratio_policy": "not_smaller"},
         sizes=[4, 3], axes=[3, 2])
    case("test_resize_antialias_nearest_ignored", 18, x8,
         {"mode": "nearest", "antialias": 1}, scales=[1.0, 1.0, 0.5, 0.4])
    case("test_resize_antialias_linear_3d_double", 18, lib.values(rng, (2, 11, 7), np.float64),
         {"mode": "linear", "antialias": 1}, scales=[1.0, 0.25, 0.5])
    case("test_resize_antialias_cubic_1d_strong", 18, lib.values(rng, (40,), np.float32),
         {"mode": "cubic", "antialias": 1}, sizes=[3])


# ---- GridSample ----

def _gs_reflect(x, lo, hi):
    rng_ = hi - lo
    if x < lo:
        dx = lo - x
        n = int(dx / rng_)
        r = dx - n * rng_
        return lo + r if n % 2 == 0 else hi - r
    if x > hi:
        dx = x - hi
        n = int(dx / rng_)
        r = dx - n * rng_
        return hi - r if n % 2 == 0 else lo + r
    return x


def _gs_pixel(data, idx, borders, padding):
    """data[idx] with each index resolved by the padding mode."""
    pos = []
    for d, i in enumerate(idx):
        size = data.shape[d]
        if padding == "zeros":
            if i < 0 or i >= size:
                return 0.0
        elif padding == "border":
            i = min(max(i, 0), size - 1)
        else:
            i = int(_gs_reflect(i, borders[d][0], borders[d][1]))
        pos.append(i)
    return float(data[tuple(pos)])


def _cubic_gs(t):
    a = -0.75
    return [_keys(a, t + 1), _keys(a, t), _keys(a, 1 - t), _keys(a, 2 - t)]


def _grid_sample_ref(x, grid, mode, padding, align):
    n_, c_ = x.shape[:2]
    dims = x.shape[2:]
    r = len(dims)
    outs = grid.shape[1:-1]
    y = np.zeros((n_, c_) + outs)
    borders = [((0.0, d - 1.0) if align else (-0.5, d - 0.5)) for d in dims]
    for n in range(n_):
        for o in itertools.product(*[range(k) for k in outs]):
            g = grid[(n,) + o].astype(np.float64)[::-1]
            xs = []
            for d in range(r):
                v = (g[d] + 1) / 2 * (dims[d] - 1) if align else ((g[d] + 1) * dims[d] - 1) / 2
                if mode == "nearest":
                    v = float(np.rint(v))
                lo, hi = borders[d]
                if v < lo or v > hi:
                    if padding == "border":
                        v = min(max(v, 0.0), dims[d] - 1.0)
                    elif padding == "reflection":
                        v = _gs_reflect(v, lo, hi)
                xs.append(v)
            for c in range(c_):
                data = x[n, c].astype(np.float64)
                if mode == "nearest":
                    y[(n, c) + o] = _gs_pixel(data, [int(v) for v in xs], borders, padding)
                    continue
                taps = []
                for v in xs:
                    f = math.floor(v)
                    t = v - f
                    if mode == "linear":
                        taps.append([(f, 1 - t), (f + 1, t)])
                    else:
                        taps.append(list(zip(range(f - 1, f + 3), _cubic_gs(t))))
                acc = 0.0
                for combo in itertools.product(*taps):
                    w = np.prod([cw for _, cw in combo])
                    acc += w * _gs_pixel(data, [ci for ci, _ in combo], borders, padding)
                y[(n, c) + o] = acc
    return y


def grid_sample_cases(out, rng, lib):
    def case(name, opset, x, grid, mode, padding, align):
        attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
        y = _grid_sample_ref(x, grid, mode, padding, align).astype(x.dtype)
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
        lib.write_case(out, name, opset, node, [("x", x), ("grid", grid)], [("y", y)])

    def grid_of(shape, dtype=np.float32):
        # Beyond [-1, 1] on purpose: every padding mode gets exercised.
        return rng.uniform(-1.4, 1.4, shape).astype(dtype)

    x5 = lib.values(rng, (2, 2, 3, 4, 5), np.float32)
    g5 = grid_of((2, 2, 3, 4, 3))
    for mode in ("linear", "nearest", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                case(f"test_gridsample_5d_{mode}_{padding}_align{align}", 20, x5, g5, mode, padding, align)
    case("test_gridsample_5d_linear_22", 22, x5, g5, "linear", "zeros", 0)
    case("test_gridsample_5d_double", 22, lib.values(rng, (1, 3, 4, 3, 2), np.float64),
         grid_of((1, 3, 2, 2, 3), np.float64), "linear", "reflection", 0)
    x4 = lib.values(rng, (1, 2, 5, 6), np.float32)
    g4 = grid_of((1, 4, 5, 2))
    # Cubic with border / reflection pads the sample point first, then each tap.
    case("test_gridsample_4d_cubic_border_20", 20, x4, g4, "cubic", "border", 0)
    case("test_gridsample_4d_cubic_reflection_20", 20, x4, g4, "cubic", "reflection", 1)
    case("test_gridsample_3d_linear_reflection", 20, lib.values(rng, (2, 3, 7), np.float32),
         grid_of((2, 5, 1)), "linear", "reflection", 0)
    case("test_gridsample_6d_linear_border", 22, lib.values(rng, (1, 1, 3, 2, 3, 2), np.float32),
         grid_of((1, 2, 2, 1, 2, 4)), "linear", "border", 1)


# ---- DFT ----

def _to_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def _from_complex(z):
    return np.stack([z.real, z.imag], axis=-1)


def dft_cases(out, rng, lib):
    def case(name, opset, x, onesided, inverse, axis=None, length=None):
        attrs = {"onesided": onesided, "inverse": inverse}
        ins, inits = ["x"], []
        if opset < 20:
            if axis is not None:
                attrs["axis"] = axis
            ax = 1 if axis is None else axis
        else:
            ax = -2 if axis is None else axis
        ax = ax % x.ndim
        if length is not None:
            ins.append("dft_length")
            inits.append(numpy_helper.from_array(np.array(length, np.int64), "dft_length"))
        if opset >= 20 and axis is not None:
            if length is None:
                ins.append("")
            ins.append("axis")
            inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
        z = _to_complex(x.astype(np.float64))
        if onesided and inverse:
            # The inverse real transform: bins 0..n/2 of a Hermitian spectrum.
            n = length if length is not None else 2 * (x.shape[ax] - 1)
            y = np.fft.irfft(z, n=n, axis=ax)[..., np.newaxis]
        elif inverse:
            y = _from_complex(np.fft.ifft(z, n=length, axis=ax))
        else:
            y = np.fft.fft(z, n=length, axis=ax)
            if onesided:
                n = y.shape[ax]
                y = np.take(y, range(n // 2 + 1), axis=ax)
            y = _from_complex(y)
        node = helper.make_node("DFT", ins, ["y"], **attrs)
        lib.write_case(out, name, opset, node, [("x", x)], [("y", y.astype(x.dtype))], initializers=inits)

    xc = lib.values(rng, (2, 5, 2), np.float32)
    case("test_dft_irfft", 20, xc, 1, 1)
    case("test_dft_irfft_odd_length", 20, xc, 1, 1, length=7)
    case("test_dft_irfft_padded_length", 20, xc, 1, 1, length=13)
    case("test_dft_irfft_short_length", 20, xc, 1, 1, length=4)
    case("test_dft_irfft_axis1_rank4", 20, lib.values(rng, (2, 4, 3, 2), np.float32), 1, 1, axis=1, length=6)
    case("test_dft_irfft_axis0", 20, lib.values(rng, (3, 4, 2), np.float32), 1, 1, axis=0)
    case("test_dft_irfft_negative_axis", 20, lib.values(rng, (2, 3, 4, 2), np.float32), 1, 1, axis=-3)
    case("test_dft_irfft_double", 20, lib.values(rng, (3, 6, 2), np.float64), 1, 1, length=9)
    case("test_dft_irfft_17", 17, lib.values(rng, (2, 4, 2), np.float32), 1, 1, axis=1)
    # Round trip through the forward real transform of a real signal.
    xr = lib.values(rng, (2, 10, 1), np.float32)
    case("test_dft_rfft_length", 20, xr, 1, 0, length=7)
    case("test_dft_rfft_axis0", 20, lib.values(rng, (6, 3, 1), np.float32), 1, 0, axis=0)
    case("test_dft_inverse_complex_length", 20, xc, 0, 1, length=3)
    case("test_dft_inverse_real", 20, xr, 0, 1)
    case("test_dft_forward_complex_padded", 20, xc, 0, 0, length=8)
    case("test_dft_forward_real_axis1_rank4", 20, lib.values(rng, (2, 3, 5, 1), np.float32), 0, 0, axis=1)


# ---- DeformConv ----

def _deform_conv_ref(x, w, offset, b, mask, strides, pads, dil, group, offset_group):
    n_, c_ = x.shape[:2]
    m_ = w.shape[0]
    ks = w.shape[2:]
    nd = len(ks)
    ins = x.shape[2:]
    outs = offset.shape[2:]
    kk = int(np.prod(ks))
    off = offset.astype(np.float64).reshape((n_, offset_group, kk, nd) + outs)
    msk = (np.ones((n_, offset_group, kk) + outs) if mask is None
           else mask.astype(np.float64).reshape((n_, offset_group, kk) + outs))
    xv = x.astype(np.float64)
    wv = w.astype(np.float64).reshape(m_, w.shape[1], kk)
    cg, mg = c_ // group, m_ // group
    per_og = c_ // offset_group
    y = np.zeros((n_, m_) + outs)
    if b is not None:
        y += b.astype(np.float64).reshape((1, m_) + (1,) * nd)

    def sample(plane, pos):
        lo = [math.floor(p) for p in pos]
        acc = 0.0
        for corner in itertools.product((0, 1), repeat=nd):
            idx = [lo[d] + corner[d] for d in range(nd)]
            if any(i < 0 or i >= ins[d] for d, i in enumerate(idx)):
                continue
            wgt = np.prod([(pos[d] - lo[d]) if corner[d] else (1 - (pos[d] - lo[d])) for d in range(nd)])
            acc += wgt * plane[tuple(idx)]
        return acc

    for n in range(n_):
        for c in range(c_):
            g, og = c // cg, c // per_og
            for o in itertools.product(*[range(k) for k in outs]):
                for k, kpos in enumerate(itertools.product(*[range(k) for k in ks])):
                    pos = [o[d] * strides[d] - pads[d] + kpos[d] * dil[d] + off[(n, og, k, d) + o] for d in range(nd)]
                    v = sample(xv[n, c], pos) * msk[(n, og, k) + o]
                    for m in range(g * mg, (g + 1) * mg):
                        y[(n, m) + o] += wv[m, c - g * cg, k] * v
    return y


def deform_conv_cases(out, rng, lib):
    def case(name, opset, xshape, wshape, strides=None, pads=None, dil=None, group=1, offset_group=1,
             bias=False, mask=False, spread=1.5, dtype=np.float32, attrs_kernel=False):
        nd = len(xshape) - 2
        st = strides or [1] * nd
        pd = pads or [0] * (2 * nd)
        dl = dil or [1] * nd
        ks = wshape[2:]
        outs = tuple((xshape[2 + d] + pd[d] + pd[nd + d] - ((ks[d] - 1) * dl[d] + 1)) // st[d] + 1
                     for d in range(nd))
        kk = int(np.prod(ks))
        x = lib.values(rng, xshape, dtype)
        w = rng.standard_normal(wshape).astype(dtype)
        offset = (rng.standard_normal((xshape[0], offset_group * kk * nd) + outs) * spread).astype(dtype)
        b = rng.standard_normal(wshape[0]).astype(dtype) if bias else None
        m = rng.uniform(0, 1, (xshape[0], offset_group * kk) + outs).astype(dtype) if mask else None
        y = _deform_conv_ref(x, w, offset, b, m, st, pd, dl, group, offset_group).astype(dtype)
        attrs = {}
        if strides:
            attrs["strides"] = strides
        if pads:
            attrs["pads"] = pads
        if dil:
            attrs["dilations"] = dil
        if group != 1:
            attrs["group"] = group
        if offset_group != 1:
            attrs["offset_group"] = offset_group
        if attrs_kernel:
            attrs["kernel_shape"] = list(ks)
        inputs = [("x", x), ("w", w), ("offset", offset)]
        names = ["x", "w", "offset"]
        if b is not None or m is not None:
            names.append("b" if b is not None else "")
            if b is not None:
                inputs.append(("b", b))
        if m is not None:
            names.append("mask")
            inputs.append(("mask", m))
        node = helper.make_node("DeformConv", names, ["y"], **attrs)
        lib.write_case(out, name, opset, node, inputs, [("y", y)])

    # The specification's example: a 3x3 ramp, 2x2 ones kernel, two taps
    # moved (answer 9.5 11.9 20 24).
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 1, 2, 2), np.float32)
    offset = np.zeros((1, 8, 2, 2), np.float32)
    offset[0, 0, 0, 0] = 0.5
    offset[0, 5, 0, 1] = -0.1
    y = _deform_conv_ref(x, w, offset, None, None, [1, 1], [0] * 4, [1, 1], 1, 1).astype(np.float32)
    lib.write_case(out, "test_deform_conv_spec_example", 19, helper.make_node("DeformConv", ["x", "w", "offset"], ["y"]),
                   [("x", x), ("w", w), ("offset", offset)], [("y", y)])
    case("test_deform_conv_basic", 19, (1, 2, 5, 5), (3, 2, 3, 3))
    case("test_deform_conv_mask_bias", 19, (2, 2, 6, 5), (2, 2, 2, 3), bias=True, mask=True)
    case("test_deform_conv_mask_only", 19, (1, 3, 4, 4), (2, 3, 2, 2), mask=True)
    case("test_deform_conv_strides_pads_dilations", 19, (1, 2, 7, 6), (2, 2, 3, 2), strides=[2, 1],
         pads=[1, 0, 2, 1], dil=[2, 1], bias=True, attrs_kernel=True)
    case("test_deform_conv_groups", 19, (1, 4, 5, 5), (6, 2, 3, 3), group=2, offset_group=2, bias=True,
         mask=True)
    case("test_deform_conv_offset_group_4", 19, (1, 4, 4, 5), (2, 4, 2, 2), offset_group=4, mask=True)
    # Offsets this large send most samples off the image, where X reads 0.
    case("test_deform_conv_far_offsets", 19, (1, 1, 4, 4), (1, 1, 2, 2), spread=4.0)
    case("test_deform_conv_22", 22, (1, 2, 5, 4), (2, 2, 3, 3), bias=True, mask=True, pads=[1, 1, 1, 1])
    case("test_deform_conv_double", 22, (1, 2, 4, 4), (2, 1, 2, 2), group=2, dtype=np.float64, mask=True)
    case("test_deform_conv_1d", 19, (2, 2, 9), (3, 2, 3), strides=[2], pads=[1, 1], bias=True)
    case("test_deform_conv_3d", 19, (1, 2, 3, 4, 3), (2, 2, 2, 2, 2), mask=True, spread=0.8)


def cases(out, rng, lib):
    resize_cases(out, rng, lib)
    grid_sample_cases(out, rng, lib)
    dft_cases(out, rng, lib)
    deform_conv_cases(out, rng, lib)
