"""Cases for ONNX's narrow element types, numbers 17-26: FLOAT8E4M3FN,
FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, UINT4, INT4, FLOAT4E2M1,
FLOAT8E8M0, UINT2 and INT2, through Cast, CastLike, QuantizeLinear,
DequantizeLinear and the operators that only move bytes.

Debian's onnx (1.12) knows none of these types, so tensors of them are
written by hand (data_type number + raw_data, 4-bit and 2-bit types packed
as the spec packs them). Expected values come from the bit definitions in
the ONNX specification (Cast's saturation tables, the float4 and e8m0
technical notes), written here independently of the engine: a float format
is its table of representable values, and rounding picks the nearest entry
(ties to the even code), overflow decided against the midpoint past the
largest value.

Run through tools/make_op_cases.py, which imports this file as a family.
"""
import math

import numpy as np
from onnx import TensorProto, helper

FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ = 17, 18, 19, 20
UINT4, INT4, FLOAT4E2M1, FLOAT8E8M0, UINT2, INT2 = 21, 22, 23, 24, 25, 26
FLOAT, FLOAT16, DOUBLE, INT32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT32

# Small float formats: exponent bits, mantissa bits, bias, where NaN lives.
# "fn": S.1111.111 only; "fnuz": 0x80 only (no -0, no infinity); "ieee":
# all-ones exponent (infinities too); None: no NaN (float4e2m1).
FORMATS = {
    FLOAT8E4M3FN: (4, 3, 7, "fn"),
    FLOAT8E4M3FNUZ: (4, 3, 8, "fnuz"),
    FLOAT8E5M2: (5, 2, 15, "ieee"),
    FLOAT8E5M2FNUZ: (5, 2, 16, "fnuz"),
    FLOAT4E2M1: (2, 1, 1, None),
}
BITS = {UINT4: 4, INT4: 4, FLOAT4E2M1: 4, UINT2: 2, INT2: 2}
INT_RANGE = {UINT4: (0, 15), INT4: (-8, 7), UINT2: (0, 3), INT2: (-2, 1)}
NAMES = {FLOAT8E4M3FN: "float8e4m3fn", FLOAT8E4M3FNUZ: "float8e4m3fnuz", FLOAT8E5M2: "float8e5m2",
         FLOAT8E5M2FNUZ: "float8e5m2fnuz", UINT4: "uint4", INT4: "int4", FLOAT4E2M1: "float4e2m1",
         FLOAT8E8M0: "float8e8m0", UINT2: "uint2", INT2: "int2"}


# ---- the formats, from their bit definitions ----

def fmt_decode(t, code):
    """Value of a small-float code (sign bit included)."""
    eb, mb, bias, nan = FORMATS[t]
    sign_bit = 1 << (eb + mb)
    mag = code & (sign_bit - 1)
    neg = bool(code & sign_bit)
    e, m = mag >> mb, mag & ((1 << mb) - 1)
    if nan == "fn" and mag == sign_bit - 1:
        return math.nan
    if nan == "fnuz" and code == sign_bit:
        return math.nan
    if nan == "ieee" and e == (1 << eb) - 1:
        return math.nan if m else (-math.inf if neg else math.inf)
    v = m * 2.0 ** (1 - bias - mb) if e == 0 else (1 + m / 2 ** mb) * 2.0 ** (e - bias)
    return -v if neg else v


def fmt_positive(t):
    """(code, value) of every finite positive magnitude, ascending."""
    eb, mb, _, _ = FORMATS[t]
    out = []
    for c in range(1 << (eb + mb)):
        v = fmt_decode(t, c)
        if math.isfinite(v):
            out.append((c, v))
    return sorted(out, key=lambda cv: cv[1])


def fmt_encode(t, x, saturate=True):
    """Cast of one float to a small-float code, per the spec's tables."""
    eb, mb, _, nan = FORMATS[t]
    sign_bit = 1 << (eb + mb)
    table = fmt_positive(t)
    max_code, max_v = table[-1]
    neg = math.copysign(1.0, x) < 0
    s = sign_bit if neg else 0
    if math.isnan(x):
        if nan == "fn":
            return s | (sign_bit - 1)
        if nan == "fnuz":
            return sign_bit
        if nan == "ieee":
            return s | (sign_bit - 1)
        return max_code  # float4e2m1: NaN gives 6
    a = abs(x)
    # The value after max at the same spacing (unbounded exponent), and
    # whether max's code is odd (it then loses the tie at the midpoint).
    step = max_v - table[-2][1]
    nxt = max_v + step
    mid = (max_v + nxt) / 2
    over = math.isinf(a) or a > mid or (a == mid and max_code & 1)
    if over:
        if saturate or nan is None:
            return s | max_code
        if nan == "fn":
            return s | (sign_bit - 1)
        if nan == "ieee":
            return s | ((1 << eb) - 1) << mb  # infinity
        return sign_bit
    best = None
    for c, v in [(0, 0.0)] + table:
        d = abs(a - v)
        if best is None or d < best[0] or (d == best[0] and c % 2 == 0):
            best = (d, c)
    code = best[1]
    if code == 0 and nan == "fnuz":
        return 0
    return s | code


def e8m0_decode(code):
    return math.nan if code == 0xFF else 2.0 ** (code - 127)


def e8m0_encode(x, saturate=True, mode="up"):
    if math.isnan(x):
        return 0xFF
    a = abs(x)
    if math.isinf(a):
        return 0xFE if saturate else 0xFF
    if a == 0:
        return 0x00 if saturate else 0xFF
    lo = math.floor(math.log2(a))
    while 2.0 ** lo > a:
        lo -= 1
    while 2.0 ** (lo + 1) <= a:
        lo += 1
    below, above = 2.0 ** lo, 2.0 ** (lo + 1)
    if a == below or mode == "down":
        e = lo
    elif mode == "up":
        e = lo + 1
    else:  # nearest, ties up
        e = lo + 1 if a - below >= above - a else lo
    code = e + 127
    if code > 254:
        return 0xFE if saturate else 0xFF
    if code < 0:
        return 0x00 if saturate else 0xFF
    return code


def int_encode(t, x):
    lo, hi = INT_RANGE[t]
    if math.isnan(x):
        return 0
    v = int(np.rint(min(max(x, lo), hi)))
    return v & ((1 << BITS[t]) - 1)


def int_decode(t, code):
    bits = BITS[t]
    code &= (1 << bits) - 1
    return code - (1 << bits) if t in (INT4, INT2) and code >> (bits - 1) else code


def decode(t, code):
    if t in FORMATS:
        return fmt_decode(t, code)
    if t == FLOAT8E8M0:
        return e8m0_decode(code)
    return float(int_decode(t, code))


def encode(t, x, saturate=True, mode="up"):
    if t in FORMATS:
        return fmt_encode(t, x, saturate)
    if t == FLOAT8E8M0:
        return e8m0_encode(x, saturate, mode)
    return int_encode(t, x)


# ---- hand-built tensors ----

def pack(t, codes):
    codes = [int(c) for c in codes]
    bits = BITS.get(t, 8)
    if bits == 8:
        return bytes(codes)
    per = 8 // bits
    out = bytearray((len(codes) + per - 1) // per)
    for i, c in enumerate(codes):
        out[i // per] |= (c & ((1 << bits) - 1)) << (bits * (i % per))
    return bytes(out)


def tensor(t, shape, codes):
    """A TensorProto of type number t holding `codes` (one per element)."""
    tp = TensorProto()
    tp.data_type = t
    tp.dims.extend(shape)
    tp.raw_data = pack(t, codes)
    return tp


def codes_of(t, values, **kw):
    return [encode(t, float(v), **kw) for v in np.asarray(values).reshape(-1)]


def decoded(t, codes, dtype=np.float32):
    return np.array([decode(t, c) for c in codes], dtype=np.float64).astype(dtype)


# ---- inputs ----

def edge_values(t):
    """Values where a cast to t goes wrong: zeros, NaN, infinities, out of
    range, tiny, and the exact midpoints between neighbours (ties)."""
    vals = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e6, -1e6, 1e-12, -1e-12, 1.0, -1.0]
    if t in FORMATS:
        table = [v for _, v in fmt_positive(t)]
        vals += table[-1:] + [-table[-1]]
        for a, b in zip(table[::5], table[1::5]):  # ties, both parities
            vals += [(a + b) / 2, -(a + b) / 2]
        for a, b in zip(table[1::7], table[2::7]):
            vals += [a + (b - a) * 0.25, b - (b - a) * 0.25]
        step = table[-1] - table[-2]
        vals += [table[-1] + step / 2, table[-1] + step / 2 * 0.99, table[-1] + step]  # the overflow edge
        vals += [table[0] / 2, table[0] / 2 * 1.01, table[0] * 0.49]  # below the smallest
    elif t == FLOAT8E8M0:
        vals = [1.0, 1.5, 1.25, 1.75, 3.0, 0.75, 6.0, 1e-3, 2.0 ** -127, 2.0 ** -126, 2.0 ** 127, 2.0 ** 127 * 1.5,
                2.0 ** 100 * 1.5, 0.0, math.inf, math.nan, 2.0 ** -120 * 1.25, 1e-40]
    else:
        lo, hi = INT_RANGE[t]
        vals = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, lo - 0.5, hi + 0.5, lo - 100.0, hi + 100.0, 1e10, -1e10,
                0.49, -0.51, float(lo), float(hi), 3.7, -3.7]
    return np.array(vals, dtype=np.float32)  # the casts read float32


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def cases(out, rng, lib):
    w = lib.write_case

    # Cast float32 -> each type and back; saturate 0 and 1 where it applies.
    cast_opset = {t: 21 for t in (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, UINT4, INT4)}
    cast_opset.update({FLOAT4E2M1: 23, FLOAT8E8M0: 24, UINT2: 25, INT2: 25})
    for t, opset in cast_opset.items():
        name = NAMES[t]
        x = edge_values(t)
        sats = (1, 0) if t in FORMATS and t != FLOAT4E2M1 or t == FLOAT8E8M0 else (None,)
        modes = ("up", "down", "nearest") if t == FLOAT8E8M0 else (None,)
        for sat in sats:
            for mode in modes:
                attrs = {"to": t}
                kw = {}
                suffix = ""
                if sat is not None:
                    attrs["saturate"] = sat
                    kw["saturate"] = bool(sat)
                    suffix += "" if sat else "_nosat"
                if mode is not None:
                    attrs["round_mode"] = mode
                    kw["mode"] = mode
                    suffix += "_" + mode
                codes = codes_of(t, x, **kw)
                w(out, f"test_types_cast_float_to_{name}{suffix}", opset, node("Cast", ["x"], ["y"], **attrs),
                  [("x", x)], [("y", tensor(t, x.shape, codes))])
        # Back: every code (4-bit and 2-bit: an odd count, so the last byte
        # is half used).
        n = 1 << BITS.get(t, 8)
        codes = list(range(n)) + ([3] if BITS.get(t, 8) < 8 else [])
        w(out, f"test_types_cast_{name}_to_float", opset, node("Cast", ["x"], ["y"], to=FLOAT),
          [("x", tensor(t, [len(codes)], codes))], [("y", decoded(t, codes))])

    # Other sources and destinations.
    with np.errstate(over="ignore"):
        x16 = edge_values(FLOAT8E5M2).astype(np.float16)
    w(out, "test_types_cast_float16_to_float8e5m2", 21, node("Cast", ["x"], ["y"], to=FLOAT8E5M2),
      [("x", x16)], [("y", tensor(FLOAT8E5M2, x16.shape, codes_of(FLOAT8E5M2, x16.astype(np.float64))))])
    codes = list(range(256))
    w(out, "test_types_cast_float8e4m3fn_to_float16", 21, node("Cast", ["x"], ["y"], to=FLOAT16),
      [("x", tensor(FLOAT8E4M3FN, [256], codes))], [("y", decoded(FLOAT8E4M3FN, codes, np.float16))])
    xd = np.array([0.1, 1.0000001, 448.0, 464.0, 464.00000001, 1e-3, -3.3e-3, 2.0 ** -9, 2.0 ** -10], dtype=np.float64)
    w(out, "test_types_cast_double_to_float8e4m3fn", 21, node("Cast", ["x"], ["y"], to=FLOAT8E4M3FN),
      [("x", xd)], [("y", tensor(FLOAT8E4M3FN, xd.shape, codes_of(FLOAT8E4M3FN, xd)))])
    xi = np.array([-100, -9, -8, -1, 0, 1, 7, 8, 100], dtype=np.int32)
    w(out, "test_types_cast_int32_to_int4", 21, node("Cast", ["x"], ["y"], to=INT4),
      [("x", xi)], [("y", tensor(INT4, xi.shape, codes_of(INT4, xi)))])
    codes = [0x00, 0x38, 0xB8, 0x3C, 0x7E, 0xFE, 0x01, 0x30]  # 0, 1, -1, 1.5, 448, -448, tiny, 0.5
    w(out, "test_types_cast_float8e4m3fn_to_int32", 21, node("Cast", ["x"], ["y"], to=INT32),
      [("x", tensor(FLOAT8E4M3FN, [8], codes))],
      [("y", np.trunc(decoded(FLOAT8E4M3FN, codes, np.float64)).astype(np.int32))])
    codes = list(range(16))
    w(out, "test_types_cast_int4_to_float8e4m3fn", 21, node("Cast", ["x"], ["y"], to=FLOAT8E4M3FN),
      [("x", tensor(INT4, [16], codes))],
      [("y", tensor(FLOAT8E4M3FN, [16], [fmt_encode(FLOAT8E4M3FN, float(int_decode(INT4, c))) for c in codes]))])

    # CastLike, saturate 0: the type comes from the second input.
    x = edge_values(FLOAT8E5M2)
    w(out, "test_types_castlike_float_to_float8e5m2_nosat", 21,
      node("CastLike", ["x", "like"], ["y"], saturate=0),
      [("x", x), ("like", tensor(FLOAT8E5M2, [1], [0]))],
      [("y", tensor(FLOAT8E5M2, x.shape, codes_of(FLOAT8E5M2, x, saturate=False)))])
    x = edge_values(UINT4)
    w(out, "test_types_castlike_float_to_uint4", 21, node("CastLike", ["x", "like"], ["y"]),
      [("x", x), ("like", tensor(UINT4, [1], [0]))], [("y", tensor(UINT4, x.shape, codes_of(UINT4, x)))])

    # QuantizeLinear / DequantizeLinear.
    def quantize(x, scale, zp_vals, t, saturate=True):
        q = (x.astype(np.float32) / scale.astype(np.float32)).astype(np.float32)
        if t in FORMATS:
            return [encode(t, float(np.float32(v) + np.float32(z)), saturate=saturate)
                    for v, z in zip(q.reshape(-1), zp_vals.reshape(-1))]
        lo, hi = INT_RANGE[t]
        return [int(np.clip(np.rint(v) + z, lo, hi)) & ((1 << BITS[t]) - 1)
                for v, z in zip(q.reshape(-1), zp_vals.reshape(-1))]

    def dequantize(codes, zp_codes, scale, t):
        x = np.array([decode(t, c) for c in codes], dtype=np.float64)
        z = np.array([decode(t, c) for c in zp_codes], dtype=np.float64)
        y = (x - z).astype(np.float32) * np.asarray(scale).reshape(-1).astype(np.float32)
        return y.astype(np.float32).reshape(np.shape(scale))

    def blocked(a, axis, block):
        return np.repeat(a, block, axis=axis)

    # float8, per tensor (opset 19) and per axis, saturate 0 and 1.
    for t in (FLOAT8E4M3FN, FLOAT8E5M2, FLOAT8E4M3FNUZ, FLOAT8E5M2FNUZ):
        name = NAMES[t]
        x = (rng.standard_normal((3, 4)) * 200).astype(np.float32)
        x.reshape(-1)[:4] = [0.0, 1e9, -1e9, 0.0625]
        for sat in (1, 0):
            scale = np.array(0.5, dtype=np.float32)
            codes = quantize(x, np.full(x.shape, 0.5, np.float32), np.zeros(x.shape), t, bool(sat))
            w(out, f"test_types_quantize_{name}{'' if sat else '_nosat'}", 19,
              node("QuantizeLinear", ["x", "s", "z"], ["y"], saturate=sat),
              [("x", x), ("s", scale), ("z", tensor(t, [], [0]))], [("y", tensor(t, x.shape, codes))])
        scale = np.array([0.5, 2.0, 0.125, 4.0], dtype=np.float32)
        codes = quantize(x, np.broadcast_to(scale, x.shape), np.zeros(x.shape), t)
        w(out, f"test_types_quantize_{name}_axis", 19, node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1),
          [("x", x), ("s", scale), ("z", tensor(t, [4], [0] * 4))], [("y", tensor(t, x.shape, codes))])
        codes = [int(c) for c in rng.integers(0, 256, 12)]
        dq = dequantize(codes, [0] * 12, np.broadcast_to(scale, (3, 4)), t)
        w(out, f"test_types_dequantize_{name}_axis", 19, node("DequantizeLinear", ["x", "s"], ["y"], axis=1),
          [("x", tensor(t, [3, 4], codes)), ("s", scale)], [("y", dq)])

    # int4 / uint4: per tensor, per axis, blocked (opset 21), with zero points.
    for t in (INT4, UINT4):
        name = NAMES[t]
        lo, hi = INT_RANGE[t]
        x = (rng.standard_normal((4, 6)) * 6).astype(np.float32)
        x.reshape(-1)[:3] = [100.0, -100.0, 0.75]
        zp = 1 if t == INT4 else 8
        scale = np.array(0.5, dtype=np.float32)
        codes = quantize(x, np.full(x.shape, 0.5, np.float32), np.full(x.shape, zp), t)
        w(out, f"test_types_quantize_{name}", 21, node("QuantizeLinear", ["x", "s", "z"], ["y"]),
          [("x", x), ("s", scale), ("z", tensor(t, [], [zp & 0xF]))], [("y", tensor(t, x.shape, codes))])
        dq = dequantize(codes, [zp & 0xF] * len(codes), np.full(x.shape, 0.5, np.float32), t)
        w(out, f"test_types_dequantize_{name}", 21, node("DequantizeLinear", ["x", "s", "z"], ["y"]),
          [("x", tensor(t, x.shape, codes)), ("s", scale), ("z", tensor(t, [], [zp & 0xF]))], [("y", dq)])
        # Blocked along axis 1, block 4 (6 columns: blocks of 4 and 2).
        s_b = np.array(rng.uniform(0.25, 2.0, (4, 2)), dtype=np.float32)
        z_vals = rng.integers(lo, hi + 1, (4, 2))
        full_s = blocked(s_b, 1, 4)[:, :6]
        full_z = blocked(z_vals, 1, 4)[:, :6]
        codes = quantize(x, full_s, full_z, t)
        zc = [int(v) & 0xF for v in z_vals.reshape(-1)]
        w(out, f"test_types_quantize_{name}_blocked", 21,
          node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=4),
          [("x", x), ("s", s_b), ("z", tensor(t, [4, 2], zc))], [("y", tensor(t, x.shape, codes))])
        dq = dequantize(codes, [int(v) & 0xF for v in full_z.reshape(-1)], full_s, t)
        w(out, f"test_types_dequantize_{name}_blocked", 21,
          node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=4),
          [("x", tensor(t, x.shape, codes)), ("s", s_b), ("z", tensor(t, [4, 2], zc))], [("y", dq)])
        # Blocked along axis 0, block 3 (4 rows: blocks of 3 and 1), odd total.
        x3 = (rng.standard_normal((4, 3)) * 5).astype(np.float32)
        s0 = np.array(rng.uniform(0.25, 2.0, (2, 3)), dtype=np.float32)
        full_s = blocked(s0, 0, 3)[:4]
        codes = quantize(x3, full_s, np.zeros(x3.shape, np.int64), t)
        w(out, f"test_types_quantize_{name}_blocked_axis0", 21,
          node("QuantizeLinear", ["x", "s"], ["y"], axis=0, block_size=3, output_dtype=t),
          [("x", x3), ("s", s0)], [("y", tensor(t, x3.shape, codes))])
        # Per axis.
        s_ax = np.array([0.5, 1.0, 0.25, 2.0], dtype=np.float32)
        codes = quantize(x, np.broadcast_to(s_ax[:, None], x.shape), np.zeros(x.shape, np.int64), t)
        w(out, f"test_types_quantize_{name}_axis0", 21,
          node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0),
          [("x", x), ("s", s_ax), ("z", tensor(t, [4], [0] * 4))], [("y", tensor(t, x.shape, codes))])

    # float4e2m1 (opset 23) and int2 / uint2 (opset 25).
    x = np.array([0.0, 0.25, 0.75, 1.1, 2.5, 3.5, 5.0, 7.0, -100.0, -0.3, 1.25, -5.5, 2.9], dtype=np.float32)
    codes = quantize(x, np.full(x.shape, 0.5, np.float32), np.zeros(x.shape), FLOAT4E2M1)
    w(out, "test_types_quantize_float4e2m1", 23, node("QuantizeLinear", ["x", "s", "z"], ["y"]),
      [("x", x), ("s", np.array(0.5, np.float32)), ("z", tensor(FLOAT4E2M1, [], [0]))],
      [("y", tensor(FLOAT4E2M1, x.shape, codes))])
    codes = list(range(16)) + [5]
    w(out, "test_types_dequantize_float4e2m1", 23, node("DequantizeLinear", ["x", "s"], ["y"]),
      [("x", tensor(FLOAT4E2M1, [17], codes)), ("s", np.array(3.0, np.float32))],
      [("y", dequantize(codes, [0] * 17, np.full(17, 3.0, np.float32), FLOAT4E2M1))])
    for t in (INT2, UINT2):
        name = NAMES[t]
        x = (rng.standard_normal(11) * 2).astype(np.float32)
        codes = quantize(x, np.full(x.shape, 0.5, np.float32), np.zeros(x.shape), t)
        w(out, f"test_types_quantize_{name}", 25, node("QuantizeLinear", ["x", "s", "z"], ["y"]),
          [("x", x), ("s", np.array(0.5, np.float32)), ("z", tensor(t, [], [0]))], [("y", tensor(t, x.shape, codes))])
        codes = [i % 4 for i in range(11)]
        w(out, f"test_types_dequantize_{name}", 25, node("DequantizeLinear", ["x", "s", "z"], ["y"]),
          [("x", tensor(t, [11], codes)), ("s", np.array(0.25, np.float32)), ("z", tensor(t, [], [1]))],
          [("y", dequantize(codes, [1] * 11, np.full(11, 0.25, np.float32), t))])

    # Byte movers: float8 through Identity, Reshape, Transpose; int4 (odd
    # count) through Reshape, Flatten, Squeeze, Unsqueeze, Shape and Size.
    codes = [int(c) for c in rng.integers(0, 256, 24)]
    perm = np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1).reshape(-1)
    w(out, "test_types_transpose_float8e4m3fn", 21, node("Transpose", ["x"], ["y"], perm=[2, 0, 1]),
      [("x", tensor(FLOAT8E4M3FN, [2, 3, 4], codes))], [("y", tensor(FLOAT8E4M3FN, [4, 2, 3], [codes[i] for i in perm]))])
    w(out, "test_types_identity_float8e5m2", 21, node("Identity", ["x"], ["y"]),
      [("x", tensor(FLOAT8E5M2, [2, 3, 4], codes))], [("y", tensor(FLOAT8E5M2, [2, 3, 4], codes))])
    codes = [int(c) for c in rng.integers(0, 16, 15)]
    shape = np.array([5, 3], dtype=np.int64)
    w(out, "test_types_reshape_int4", 21, node("Reshape", ["x", "shape"], ["y"]),
      [("x", tensor(INT4, [3, 5], codes)), ("shape", shape)], [("y", tensor(INT4, [5, 3], codes))])
    w(out, "test_types_flatten_uint4", 21, node("Flatten", ["x"], ["y"], axis=1),
      [("x", tensor(UINT4, [3, 1, 5], codes))], [("y", tensor(UINT4, [3, 5], codes))])
    w(out, "test_types_squeeze_float4e2m1", 21, node("Squeeze", ["x", "axes"], ["y"]),
      [("x", tensor(FLOAT4E2M1, [3, 1, 5], codes)), ("axes", np.array([1], np.int64))],
      [("y", tensor(FLOAT4E2M1, [3, 5], codes))])
    w(out, "test_types_unsqueeze_int2", 25, node("Unsqueeze", ["x", "axes"], ["y"]),
      [("x", tensor(INT2, [15], [c & 3 for c in codes])), ("axes", np.array([0], np.int64))],
      [("y", tensor(INT2, [1, 15], [c & 3 for c in codes]))])
    w(out, "test_types_shape_size_int4", 21,
      [node("Shape", ["x"], ["shape"]), node("Size", ["x"], ["size"])],
      [("x", tensor(INT4, [3, 5], codes))], [("shape", np.array([3, 5], np.int64)), ("size", np.array(15, np.int64))])
