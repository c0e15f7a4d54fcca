"""Cases for the transformer operators: Attention (23, 24), RotaryEmbedding
(23), RMSNormalization (23), GroupNormalization (18, 21). Run by
tools/make_op_cases.py. Expected outputs come from the numpy functions
below, written from the operators' definitions and computed in float64.

Attention follows the ONNX reference implementation where the text leaves
room: the softcap applies to the scaled product before the bias is added;
causal masking is aligned to the bottom right (a query at row i sees keys
j <= i + past_sequence_length, or + nonpad_kv_seqlen[b] - q_sequence_length
when that input is given); qk_matmul_output_mode 0 and 1 give the scaled,
softcapped product, 2 adds the bias, 3 is the softmax.
"""
import numpy as np
from onnx import helper


def attention_ref(q, k, v, mask=None, past_k=None, past_v=None, nonpad=None, scale=None, causal=False, qh=None,
                  kvh=None, softcap=0.0, mode=0):
    dtype = q.dtype
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    rank3 = q.ndim == 3
    if rank3:
        b, sq, _ = q.shape
        q = q.reshape(b, sq, qh, -1).transpose(0, 2, 1, 3)
        k = k.reshape(b, k.shape[1], kvh, -1).transpose(0, 2, 1, 3)
        v = v.reshape(b, v.shape[1], kvh, -1).transpose(0, 2, 1, 3)
    b, hq, sq, d = q.shape
    if scale is None:
        scale = 1 / np.sqrt(d)
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k = np.concatenate([past_k.astype(np.float64), k], axis=2)
        v = np.concatenate([past_v.astype(np.float64), v], axis=2)
    present_k, present_v = k, v
    total = k.shape[2]
    bias = np.zeros((b, hq, sq, total))
    if mask is not None:
        m = mask
        if m.shape[-1] < total:
            pad = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
            m = np.pad(m, pad, constant_values=False if m.dtype == np.bool_ else -np.inf)
        m = np.where(m, 0.0, -np.inf) if m.dtype == np.bool_ else m.astype(np.float64)
        bias = bias + m
    i = np.arange(sq).reshape(1, sq, 1)
    j = np.arange(total).reshape(1, 1, total)
    if causal:
        offset = np.full((b, 1, 1), past) if nonpad is None else (nonpad - sq).reshape(b, 1, 1)
        bias = bias + np.where(j <= i + offset, 0.0, -np.inf)[:, None]
    if nonpad is not None:
        bias = bias + np.where(j < nonpad.reshape(b, 1, 1), 0.0, -np.inf)[:, None]
    reps = hq // k.shape[1]
    k = np.repeat(k, reps, axis=1)
    v = np.repeat(v, reps, axis=1)
    qk = np.matmul(q, k.transpose(0, 1, 3, 2)) * scale
    if softcap > 0:
        qk = softcap * np.tanh(qk / softcap)
    out_qk = qk
    scores = qk + bias
    if mode == 2:
        out_qk = scores
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    if mode == 3:
        out_qk = p
    y = np.matmul(p, v)
    if rank3:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    return y.astype(dtype), present_k.astype(dtype), present_v.astype(dtype), out_qk.astype(dtype)


def rotary_ref(x, cos, sin, pos=None, interleaved=False, rot=0, heads=0):
    shape = x.shape
    x64 = x.astype(np.float64)
    if x.ndim == 4:
        x64 = x64.transpose(0, 2, 1, 3)
    else:
        x64 = x64.reshape(shape[0], shape[1], heads, -1)
    d = x64.shape[3]
    rot = rot or d
    c, s = (cos[pos], sin[pos]) if pos is not None else (cos, sin)
    c = c.astype(np.float64)[:, :, None, :]
    s = s.astype(np.float64)[:, :, None, :]
    xr = x64[..., :rot]
    x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if interleaved else (xr[..., :rot // 2], xr[..., rot // 2:])
    real, imag = c * x1 - s * x2, s * x1 + c * x2
    out = x64.copy()
    if interleaved:
        out[..., 0:rot:2], out[..., 1:rot:2] = real, imag
    else:
        out[..., :rot // 2], out[..., rot // 2:rot] = real, imag
    out = out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(shape)
    return out.astype(x.dtype)


def rmsnorm_ref(x, scale, axis=-1, eps=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    r = np.sqrt(np.mean(x64 * x64, axis=axes, keepdims=True) + eps)
    return (x64 / r * scale.astype(np.float64)).astype(x.dtype)


def groupnorm_ref(x, scale, bias, groups, eps=1e-5, per_channel=True):
    n, c = x.shape[:2]
    x64 = x.astype(np.float64).reshape(n, groups, -1)
    mean = x64.mean(axis=2, keepdims=True)
    var = x64.var(axis=2, keepdims=True)
    y = ((x64 - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = [1, c] + [1] * (x.ndim - 2)
    if per_channel:
        s, bb = scale.astype(np.float64), bias.astype(np.float64)
    else:
        s, bb = np.repeat(scale.astype(np.float64), c // groups), np.repeat(bias.astype(np.float64), c // groups)
    return (y * s.reshape(shape) + bb.reshape(shape)).astype(x.dtype)


def attention_case(lib, out, name, opset, ins, attrs, outputs=("Y",), **ref_kw):
    """ins: list of (input name, array or None) in the operator's order."""
    names = [n if a is not None else "" for n, a in ins]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("Attention", names, list(outputs), **attrs)
    given = {n: a for n, a in ins if a is not None}
    y, pk, pv, qk = attention_ref(given["Q"], given["K"], given["V"], mask=given.get("attn_mask"),
                                  past_k=given.get("past_key"), past_v=given.get("past_value"),
                                  nonpad=given.get("nonpad_kv_seqlen"), scale=attrs.get("scale"),
                                  causal=bool(attrs.get("is_causal", 0)), qh=attrs.get("q_num_heads"),
                                  kvh=attrs.get("kv_num_heads"), softcap=attrs.get("softcap", 0.0),
                                  mode=attrs.get("qk_matmul_output_mode", 0), **ref_kw)
    results = {"Y": y, "present_key": pk, "present_value": pv, "qk_matmul_output": qk}
    lib.write_case(out, name, opset, node, [(n, a) for n, a in ins if a is not None],
                   [(n, results[n]) for n in outputs if n])


def cases(out, rng, lib):
    layer_cases(out, rng, lib)
    f32 = np.float32
    r = lambda *shape, dtype=f32: rng.standard_normal(shape).astype(dtype)

    # Attention: 4-D multi-head, default scale, cross lengths.
    for opset in (23, 24):
        attention_case(lib, out, f"test_attention_4d_{opset}", opset,
                       [("Q", r(2, 3, 4, 8)), ("K", r(2, 3, 6, 8)), ("V", r(2, 3, 6, 8))], {})
    # 3-D grouped-query heads, value head size differing from the key's.
    attention_case(lib, out, "test_attention_3d_gqa", 23,
                   [("Q", r(2, 5, 4 * 8)), ("K", r(2, 7, 2 * 8)), ("V", r(2, 7, 2 * 6))],
                   {"q_num_heads": 4, "kv_num_heads": 2})
    # Multi-query heads, causal, explicit scale.
    attention_case(lib, out, "test_attention_mqa_causal_scale", 23,
                   [("Q", r(1, 4, 6, 16)), ("K", r(1, 1, 6, 16)), ("V", r(1, 1, 6, 16))],
                   {"is_causal": 1, "scale": 0.3})
    # Masks: bool (q, total) broadcast; float (batch, 1, q, total); a float
    # mask shorter than the keys (padded with -inf).
    bmask = rng.random((4, 6)) > 0.3
    bmask[:, 0] = True
    attention_case(lib, out, "test_attention_bool_mask", 23,
                   [("Q", r(2, 3, 4, 8)), ("K", r(2, 3, 6, 8)), ("V", r(2, 3, 6, 8)), ("attn_mask", bmask)], {})
    attention_case(lib, out, "test_attention_float_mask_4d", 23,
                   [("Q", r(2, 3, 4, 8)), ("K", r(2, 3, 6, 8)), ("V", r(2, 3, 6, 8)),
                    ("attn_mask", r(2, 1, 4, 6))], {})
    attention_case(lib, out, "test_attention_short_mask", 23,
                   [("Q", r(1, 2, 3, 8)), ("K", r(1, 2, 5, 8)), ("V", r(1, 2, 5, 8)), ("attn_mask", r(3, 4))], {})
    # Past and present keys and values, causal (the query rows sit after
    # the past), mask and 3-D inputs together.
    attention_case(lib, out, "test_attention_past_present_causal", 23,
                   [("Q", r(2, 3, 2 * 8)), ("K", r(2, 3, 2 * 8)), ("V", r(2, 3, 2 * 4)), ("attn_mask", None),
                    ("past_key", r(2, 2, 5, 8)), ("past_value", r(2, 2, 5, 4))],
                   {"q_num_heads": 2, "kv_num_heads": 2, "is_causal": 1},
                   outputs=("Y", "present_key", "present_value"))
    attention_case(lib, out, "test_attention_past_present_gqa_mask", 24,
                   [("Q", r(1, 4, 1, 8)), ("K", r(1, 2, 1, 8)), ("V", r(1, 2, 1, 8)),
                    ("attn_mask", np.ones((1, 7), dtype=bool)), ("past_key", r(1, 2, 6, 8)),
                    ("past_value", r(1, 2, 6, 8))], {}, outputs=("Y", "present_key", "present_value"))
    # Softcap and each qk_matmul_output mode.
    for mode in range(4):
        attention_case(lib, out, f"test_attention_softcap_qk_mode{mode}", 23,
                       [("Q", r(1, 2, 3, 8) * 3), ("K", r(1, 2, 5, 8) * 3), ("V", r(1, 2, 5, 8)),
                        ("attn_mask", r(1, 1, 3, 5))],
                       {"softcap": 2.5, "qk_matmul_output_mode": mode},
                       outputs=("Y", "", "", "qk_matmul_output"))
    # Opset 24: nonpad_kv_seqlen, alone and with causal (a static cache).
    for causal in (0, 1):
        attention_case(lib, out, f"test_attention_nonpad{'_causal' if causal else ''}", 24,
                       [("Q", r(2, 2, 3, 8)), ("K", r(2, 2, 8, 8)), ("V", r(2, 2, 8, 8)), ("attn_mask", None),
                        ("past_key", None), ("past_value", None),
                        ("nonpad_kv_seqlen", np.array([5, 8], dtype=np.int64))], {"is_causal": causal})
    # A decoding step (one query row) of grouped-query heads: the fused
    # kernel takes a group's heads as the rows of one product.
    attention_case(lib, out, "test_attention_decode_gqa_qk_nonpad", 24,
                   [("Q", r(2, 8, 1, 8)), ("K", r(2, 2, 9, 8)), ("V", r(2, 2, 9, 4)), ("attn_mask", r(2, 8, 1, 9)),
                    ("past_key", None), ("past_value", None),
                    ("nonpad_kv_seqlen", np.array([6, 9], dtype=np.int64))],
                   {"is_causal": 1, "qk_matmul_output_mode": 3}, outputs=("Y", "", "", "qk_matmul_output"))
    attention_case(lib, out, "test_attention_decode_gqa_3d", 23,
                   [("Q", r(1, 1, 6 * 8)), ("K", r(1, 5, 2 * 8)), ("V", r(1, 5, 2 * 8))],
                   {"q_num_heads": 6, "kv_num_heads": 2})
    # float16: the fused kernel widens to float32 and rounds back.
    h16 = lambda *shape: r(*shape).astype(np.float16)
    attention_case(lib, out, "test_attention_float16_causal_past", 23,
                   [("Q", h16(1, 4, 3, 8)), ("K", h16(1, 2, 3, 8)), ("V", h16(1, 2, 3, 8)),
                    ("attn_mask", h16(1, 1, 3, 8)), ("past_key", h16(1, 2, 5, 8)), ("past_value", h16(1, 2, 5, 8))],
                   {"is_causal": 1, "softcap": 3.0, "qk_matmul_output_mode": 2},
                   outputs=("Y", "present_key", "present_value", "qk_matmul_output"))
    attention_case(lib, out, "test_attention_float16_3d_decode", 23,
                   [("Q", h16(2, 1, 4 * 8)), ("K", h16(2, 6, 2 * 8)), ("V", h16(2, 6, 2 * 8))],
                   {"q_num_heads": 4, "kv_num_heads": 2})
    # Double, and a sequence longer than the fused kernel's block.
    attention_case(lib, out, "test_attention_double", 23,
                   [("Q", r(1, 2, 3, 4, dtype=np.float64)), ("K", r(1, 2, 5, 4, dtype=np.float64)),
                    ("V", r(1, 2, 5, 4, dtype=np.float64))], {"is_causal": 1})
    attention_case(lib, out, "test_attention_long_causal", 23,
                   [("Q", r(1, 2, 150, 16)), ("K", r(1, 2, 150, 16)), ("V", r(1, 2, 150, 16))], {"is_causal": 1})

    # RotaryEmbedding.
    x = r(2, 3, 5, 8)
    cos, sin = r(2, 5, 4), r(2, 5, 4)
    lib.write_case(out, "test_rotary_embedding_4d", 23,
                   helper.make_node("RotaryEmbedding", ["X", "cos", "sin"], ["Y"]),
                   [("X", x), ("cos", cos), ("sin", sin)], [("Y", rotary_ref(x, cos, sin))])
    x = r(2, 5, 3 * 8)
    cos, sin = r(16, 4), r(16, 4)
    pos = rng.integers(0, 16, (2, 5)).astype(np.int64)
    lib.write_case(out, "test_rotary_embedding_3d_interleaved_pos", 23,
                   helper.make_node("RotaryEmbedding", ["X", "cos", "sin", "pos"], ["Y"], interleaved=1, num_heads=3),
                   [("X", x), ("cos", cos), ("sin", sin), ("pos", pos)],
                   [("Y", rotary_ref(x, cos, sin, pos, interleaved=True, heads=3))])
    x = r(1, 2, 4, 10)
    cos, sin = r(8, 3), r(8, 3)
    pos = np.array([[0, 3, 7, 2]], dtype=np.int64)
    for inter in (0, 1):
        lib.write_case(out, f"test_rotary_embedding_partial{'_interleaved' if inter else ''}", 23,
                       helper.make_node("RotaryEmbedding", ["X", "cos", "sin", "pos"], ["Y"], interleaved=inter,
                                        rotary_embedding_dim=6),
                       [("X", x), ("cos", cos), ("sin", sin), ("pos", pos)],
                       [("Y", rotary_ref(x, cos, sin, pos, interleaved=bool(inter), rot=6))])
    x, cos, sin = r(1, 2, 3, 4, dtype=np.float64), r(1, 3, 2, dtype=np.float64), r(1, 3, 2, dtype=np.float64)
    lib.write_case(out, "test_rotary_embedding_double", 23,
                   helper.make_node("RotaryEmbedding", ["X", "cos", "sin"], ["Y"]),
                   [("X", x), ("cos", cos), ("sin", sin)], [("Y", rotary_ref(x, cos, sin))])

    # RMSNormalization.
    x, s = r(2, 3, 16), r(16)
    lib.write_case(out, "test_rms_normalization", 23, helper.make_node("RMSNormalization", ["X", "scale"], ["Y"]),
                   [("X", x), ("scale", s)], [("Y", rmsnorm_ref(x, s))])
    x, s = r(2, 3, 4, 5), r(1, 4, 5)
    lib.write_case(out, "test_rms_normalization_axis1_eps", 23,
                   helper.make_node("RMSNormalization", ["X", "scale"], ["Y"], axis=1, epsilon=1e-3),
                   [("X", x), ("scale", s)], [("Y", rmsnorm_ref(x, s, axis=1, eps=np.float64(np.float32(1e-3))))])
    x, s = r(3, 7, dtype=np.float64), r(7, dtype=np.float64)
    lib.write_case(out, "test_rms_normalization_double", 23, helper.make_node("RMSNormalization", ["X", "scale"], ["Y"]),
                   [("X", x), ("scale", s)], [("Y", rmsnorm_ref(x, s))])

    # GroupNormalization: 18 scales per group, 21 per channel.
    x = r(2, 6, 3, 4)
    s18, b18 = r(3), r(3)
    lib.write_case(out, "test_group_normalization_18", 18,
                   helper.make_node("GroupNormalization", ["X", "scale", "bias"], ["Y"], num_groups=3),
                   [("X", x), ("scale", s18), ("bias", b18)],
                   [("Y", groupnorm_ref(x, s18, b18, 3, per_channel=False))])
    s21, b21 = r(6), r(6)
    for groups in (1, 2, 6):
        lib.write_case(out, f"test_group_normalization_21_g{groups}", 21,
                       helper.make_node("GroupNormalization", ["X", "scale", "bias"], ["Y"], num_groups=groups,
                                        epsilon=1e-2),
                       [("X", x), ("scale", s21), ("bias", b21)],
                       [("Y", groupnorm_ref(x, s21, b21, groups, eps=np.float64(np.float32(1e-2))))])
    x = r(2, 4, 9, dtype=np.float64)
    s, b = r(4, dtype=np.float64), r(4, dtype=np.float64)
    lib.write_case(out, "test_group_normalization_21_3d_double", 21,
                   helper.make_node("GroupNormalization", ["X", "scale", "bias"], ["Y"], num_groups=2),
                   [("X", x), ("scale", s), ("bias", b)], [("Y", groupnorm_ref(x, s, b, 2))])


def gelu(x):
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def layer_cases(out, rng, lib):
    """A transformer encoder layer and a decoder layer with a KV cache, at
    opset 23, as exporters write them: weights as initializers."""
    from onnx import numpy_helper
    f32 = np.float32
    w = lambda name, *shape: numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(f32),
                                                     name)
    mm = lambda a, t: a.astype(np.float64) @ numpy_helper.to_array(t).astype(np.float64)
    node = helper.make_node
    hidden, heads, hd = 32, 4, 8

    # Encoder: pre-norm attention with a padding mask, then a Gelu MLP;
    # GroupNormalization over the hidden features as a final norm.
    inits = [w("wq", hidden, hidden), w("wk", hidden, hidden), w("wv", hidden, hidden), w("wo", hidden, hidden),
             w("w1", hidden, 64), w("w2", 64, hidden),
             numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(f32), "g1"),
             numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(f32), "g2"),
             numpy_helper.from_array(rng.standard_normal(hidden).astype(f32), "gs"),
             numpy_helper.from_array(rng.standard_normal(hidden).astype(f32), "gb")]
    nodes = [node("RMSNormalization", ["x", "g1"], ["n1"]),
             node("MatMul", ["n1", "wq"], ["q"]), node("MatMul", ["n1", "wk"], ["k"]),
             node("MatMul", ["n1", "wv"], ["v"]),
             node("Attention", ["q", "k", "v", "mask"], ["a"], q_num_heads=heads, kv_num_heads=heads),
             node("MatMul", ["a", "wo"], ["o"]), node("Add", ["x", "o"], ["h"]),
             node("RMSNormalization", ["h", "g2"], ["n2"]), node("MatMul", ["n2", "w1"], ["f1"]),
             node("Gelu", ["f1"], ["f2"]), node("MatMul", ["f2", "w2"], ["f3"]), node("Add", ["h", "f3"], ["h2"]),
             node("Transpose", ["h2"], ["ht"], perm=[0, 2, 1]),
             node("GroupNormalization", ["ht", "gs", "gb"], ["gn"], num_groups=4),
             node("Transpose", ["gn"], ["y"], perm=[0, 2, 1])]
    x = rng.standard_normal((2, 10, hidden)).astype(f32)
    mask = np.ones((2, 1, 1, 10), dtype=bool)
    mask[1, ..., 7:] = False  # the second sequence is 7 tokens long
    t = {i.name: i for i in inits}
    arr = lambda n: numpy_helper.to_array(t[n]).astype(np.float64)
    n1 = rmsnorm_ref(x.astype(np.float64), arr("g1"))
    a = attention_ref(mm(n1, t["wq"]), mm(n1, t["wk"]), mm(n1, t["wv"]), mask=mask, qh=heads, kvh=heads)[0]
    h = x + mm(a, t["wo"])
    h2 = h + mm(gelu(mm(rmsnorm_ref(h, arr("g2")), t["w1"])), t["w2"])
    y = groupnorm_ref(h2.transpose(0, 2, 1), arr("gs"), arr("gb"), 4).transpose(0, 2, 1)
    lib.write_case(out, "test_layer_encoder_opset23", 23, nodes, [("x", x), ("mask", mask)],
                   [("y", y.astype(f32))], initializers=inits)

    # Decoder step: rotary positions, grouped-query causal attention over a
    # cache of earlier tokens, a SiLU (Swish) MLP.
    kvh = 2
    inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    ang = np.arange(64)[:, None] * inv[None, :]
    inits = [w("wq", hidden, heads * hd), w("wk", hidden, kvh * hd), w("wv", hidden, kvh * hd),
             w("wo", heads * hd, hidden), w("w1", hidden, 64), w("w2", 64, hidden),
             numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(f32), "g1"),
             numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(f32), "g2"),
             numpy_helper.from_array(np.cos(ang).astype(f32), "cos"),
             numpy_helper.from_array(np.sin(ang).astype(f32), "sin")]
    nodes = [node("RMSNormalization", ["x", "g1"], ["n1"]),
             node("MatMul", ["n1", "wq"], ["q0"]), node("MatMul", ["n1", "wk"], ["k0"]),
             node("MatMul", ["n1", "wv"], ["v"]),
             node("RotaryEmbedding", ["q0", "cos", "sin", "pos"], ["q"], num_heads=heads),
             node("RotaryEmbedding", ["k0", "cos", "sin", "pos"], ["k"], num_heads=kvh),
             node("Attention", ["q", "k", "v", "", "past_key", "past_value"], ["a", "present_key", "present_value"],
                  q_num_heads=heads, kv_num_heads=kvh, is_causal=1),
             node("MatMul", ["a", "wo"], ["o"]), node("Add", ["x", "o"], ["h"]),
             node("RMSNormalization", ["h", "g2"], ["n2"]), node("MatMul", ["n2", "w1"], ["f1"]),
             node("Swish", ["f1"], ["f2"]), node("MatMul", ["f2", "w2"], ["f3"]), node("Add", ["h", "f3"], ["y"])]
    past, new = 6, 3
    x = rng.standard_normal((1, new, hidden)).astype(f32)
    pk = rng.standard_normal((1, kvh, past, hd)).astype(f32)
    pv = rng.standard_normal((1, kvh, past, hd)).astype(f32)
    pos = np.arange(past, past + new, dtype=np.int64).reshape(1, new)
    t = {i.name: i for i in inits}
    cos, sin = arr("cos"), arr("sin")
    n1 = rmsnorm_ref(x.astype(np.float64), arr("g1"))
    q = rotary_ref(mm(n1, t["wq"]), cos, sin, pos, heads=heads)
    k = rotary_ref(mm(n1, t["wk"]), cos, sin, pos, heads=kvh)
    a, pk_out, pv_out, _ = attention_ref(q, k, mm(n1, t["wv"]), past_k=pk, past_v=pv, causal=True, qh=heads,
                                         kvh=kvh)
    h = x + mm(a, t["wo"])
    f1 = mm(rmsnorm_ref(h, arr("g2")), t["w1"])
    y = h + mm(f1 / (1 + np.exp(-f1)), t["w2"])
    lib.write_case(out, "test_layer_decoder_kv_opset24", 24, nodes,
                   [("x", x), ("past_key", pk), ("past_value", pv), ("pos", pos)],
                   [("y", y.astype(f32)), ("present_key", pk_out.astype(f32)), ("present_value", pv_out.astype(f32))],
                   initializers=inits)
