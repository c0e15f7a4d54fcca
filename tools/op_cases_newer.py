"""Cases for operators added after opset 17 (CumProd, BitCast, LpNormalization,
Col2Im, CenterCropPad, AffineGrid, TensorScatter) and the ai.onnx.ml ops
Binarizer, ArrayFeatureExtractor, LabelEncoder and TreeEnsemble. Expected
outputs follow each operator's definition in the ONNX specification,
computed with numpy in float64 and rounded to the output type.

Run through tools/make_op_cases.py, which imports this file as a family.
"""
import itertools

import numpy as np
import onnx
from onnx import helper, numpy_helper

ML = {"ai.onnx.ml": 4}
ML5 = {"ai.onnx.ml": 5}


def _node(op, ins, outs, domain="", **attrs):
    return helper.make_node(op, ins, outs, domain=domain, **attrs)


def cumprod(x, axis, exclusive, reverse):
    x = np.moveaxis(x, axis, -1)
    if reverse:
        x = x[..., ::-1]
    out = np.cumprod(x, axis=-1)
    if exclusive:
        out = np.concatenate([np.ones_like(out[..., :1]), out[..., :-1]], axis=-1)
    if reverse:
        out = out[..., ::-1]
    return np.moveaxis(out, -1, axis)


def col2im(x, image, block, dil, pads, strides):
    n, ck, _ = x.shape
    nd = len(image)
    kernel = int(np.prod(block))
    c = ck // kernel
    cols = [(image[i] + pads[i] + pads[nd + i] - (dil[i] * (block[i] - 1) + 1)) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((n, c) + tuple(image), dtype=np.float64)
    xv = x.astype(np.float64).reshape(n, c, kernel, -1)
    for k, off in enumerate(itertools.product(*[range(b) for b in block])):
        for col, pos in enumerate(itertools.product(*[range(cc) for cc in cols])):
            at = [pos[i] * strides[i] - pads[i] + off[i] * dil[i] for i in range(nd)]
            if all(0 <= at[i] < image[i] for i in range(nd)):
                y[(slice(None), slice(None)) + tuple(at)] += xv[:, :, k, col]
    return y


def center_crop_pad(x, shape, axes):
    out_shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for a, s in zip(axes, shape):
        d = x.shape[a]
        out_shape[a] = s
        if s <= d:
            st = (d - s) // 2
            src[a] = slice(st, st + s)
        else:
            st = (s - d) // 2
            dst[a] = slice(st, st + d)
    y = np.zeros(out_shape, dtype=x.dtype)
    y[tuple(dst)] = x[tuple(src)]
    return y


def affine_grid(theta, size, align):
    def coords(n):
        if align:
            return np.array([-1.0 + 2.0 * i / (n - 1) if n > 1 else -1.0 for i in range(n)])
        return np.array([-1.0 + (2.0 * i + 1.0) / n for i in range(n)])

    th = theta.astype(np.float64)
    if len(size) == 4:
        h, w = size[2:]
        ys, xs = np.meshgrid(coords(h), coords(w), indexing="ij")
        base = np.stack([xs, ys, np.ones_like(xs)], axis=-1)
        return np.einsum("hwj,nij->nhwi", base, th)
    d, h, w = size[2:]
    zs, ys, xs = np.meshgrid(coords(d), coords(h), coords(w), indexing="ij")
    base = np.stack([xs, ys, zs, np.ones_like(xs)], axis=-1)
    return np.einsum("dhwj,nij->ndhwi", base, th)


def tensor_scatter(past, upd, wi, axis, circular):
    y = past.copy()
    axis %= past.ndim
    max_len, length = past.shape[axis], upd.shape[axis]
    for prefix in np.ndindex(past.shape[:axis]):
        w = 0 if wi is None else int(wi[prefix[0]])
        for s in range(length):
            at = (w + s) % max_len if circular else w + s
            y[prefix + (at,)] = upd[prefix + (s,)]
    return y


def tree_predict(x, t):
    """TreeEnsemble-5 by its definition: walk each tree, aggregate per target."""
    n_targets, agg, post = t["n_targets"], t.get("aggregate_function", 1), t.get("post_transform", 0)
    sets, members = {}, list(t.get("membership_values", []))
    pos = 0
    for i, m in enumerate(t["nodes_modes"]):
        if m == 6:
            s = set()
            while not np.isnan(members[pos]):
                s.add(members[pos])
                pos += 1
            pos += 1
            sets[i] = s
    miss = t.get("nodes_missing_value_tracks_true", [0] * len(t["nodes_modes"]))
    out = np.zeros((x.shape[0], n_targets))
    for r, row in enumerate(x.astype(np.float64)):
        acc = np.full(n_targets, {2: np.finfo(x.dtype).max, 3: np.finfo(x.dtype).min}.get(agg, 0.0))
        for root in t["tree_roots"]:
            i, leaf = root, None
            while leaf is None:
                v, s, m = row[t["nodes_featureids"][i]], t["nodes_splits"][i], t["nodes_modes"][i]
                go = [v <= s, v < s, v >= s, v > s, v == s, v != s, v in sets.get(i, ())][m]
                go = go or (bool(miss[i]) and np.isnan(v))
                nxt, is_leaf = (t["nodes_truenodeids"][i], t["nodes_trueleafs"][i]) if go else (
                    t["nodes_falsenodeids"][i], t["nodes_falseleafs"][i])
                if is_leaf:
                    leaf = nxt
                i = nxt
            tid, w = t["leaf_targetids"][leaf], float(t["leaf_weights"][leaf])
            if agg == 0:
                acc[tid] += w / len(t["tree_roots"])
            elif agg == 1:
                acc[tid] += w
            elif agg == 2:
                acc[tid] = min(acc[tid], w)
            else:
                acc[tid] = max(acc[tid], w)
        if post == 1:
            e = np.exp(acc - acc.max())
            acc = e / e.sum()
        elif post == 2:
            acc = 1.0 / (1.0 + np.exp(-acc))
        out[r] = acc
    return out


def cases(out, rng, lib):
    wc, values = lib.write_case, lib.values

    # CumProd-26: inclusive / exclusive, forward / reverse, float and int.
    for dtype, tname in ((np.float32, "float"), (np.int64, "int64"), (np.float64, "double")):
        for exclusive, reverse in itertools.product((0, 1), (0, 1)):
            if dtype == np.int64:
                x = rng.integers(-3, 4, (2, 3, 4)).astype(dtype)
            else:
                x = (rng.uniform(0.5, 1.5, (2, 3, 4)) * rng.choice([-1, 1], (2, 3, 4))).astype(dtype)
            axis = np.array(1 if exclusive else -1, dtype=np.int64)
            y = cumprod(x.astype(np.float64) if dtype != np.int64 else x, int(axis), exclusive, reverse).astype(dtype)
            wc(out, f"test_cumprod_{tname}_ex{exclusive}_rev{reverse}", 26,
               _node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse),
               [("x", x), ("axis", axis)], [("y", y)])
    x = rng.integers(1, 5, (5,)).astype(np.int32)
    wc(out, "test_cumprod_1d_int32_axis_int32", 26, _node("CumProd", ["x", "axis"], ["y"]),
       [("x", x), ("axis", np.array(0, dtype=np.int32))], [("y", np.cumprod(x).astype(np.int32))])

    # BitCast-26: same-width reinterpretation, any direction.
    pairs = ((np.float32, np.int32, 6), (np.int32, np.float32, 1), (np.float64, np.uint64, 13),
             (np.uint16, np.float16, 10), (np.int8, np.uint8, 2), (np.int64, np.float64, 11),
             (np.float16, np.int16, 5))
    for src, dst, to in pairs:
        if np.issubdtype(src, np.floating):
            x = values(rng, (3, 4), src)
        elif np.issubdtype(dst, np.floating):
            x = values(rng, (3, 4), dst).view(src)  # ordinary floats, not NaN or denormal patterns
        else:
            info = np.iinfo(src)
            x = rng.integers(info.min, info.max, (3, 4), endpoint=True).astype(src)
        wc(out, f"test_bitcast_{np.dtype(src).name}_to_{np.dtype(dst).name}", 26,
           _node("BitCast", ["x"], ["y"], to=to), [("x", x)], [("y", x.view(dst))])

    # LpNormalization-1 and -22: p 1 and 2 along several axes.
    for opset in (1, 22):
        for p, axis in ((2, -1), (1, 1), (2, 0)):
            x = values(rng, (3, 4, 5), np.float32)
            x64 = x.astype(np.float64)
            norm = np.sum(np.abs(x64) ** p, axis=axis, keepdims=True) ** (1.0 / p)
            y = (x64 / norm).astype(np.float32)
            wc(out, f"test_lpnormalization_p{p}_axis{axis}_{opset}".replace("-", "m"), opset,
               _node("LpNormalization", ["x"], ["y"], p=p, axis=axis), [("x", x)], [("y", y)])
    x = values(rng, (2, 6), np.float64)
    y = x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
    wc(out, "test_lpnormalization_default_double", 22, _node("LpNormalization", ["x"], ["y"]), [("x", x)], [("y", y)])

    # Col2Im-18: defaults, strides, pads, dilations, 1-D and 3-D images.
    col_cases = (
        ("default", [5, 5], [2, 2], {}, 2),
        ("strides", [5, 5], [1, 5], {"strides": [2, 1]}, 1),
        ("pads", [4, 5], [3, 3], {"pads": [1, 0, 1, 2]}, 2),
        ("dilations", [6, 6], [2, 2], {"dilations": [2, 3]}, 1),
        ("all", [7, 6], [2, 3], {"dilations": [2, 1], "pads": [1, 2, 0, 1], "strides": [2, 3]}, 3),
        ("1d", [9], [3], {"strides": [2]}, 2),
        ("3d", [3, 4, 3], [2, 2, 1], {"pads": [0, 1, 0, 1, 0, 0]}, 1),
    )
    for name, image, block, attrs, c in col_cases:
        nd = len(image)
        dil, pads, strides = attrs.get("dilations", [1] * nd), attrs.get("pads", [0] * (2 * nd)), attrs.get("strides", [1] * nd)
        cols = int(np.prod([(image[i] + pads[i] + pads[nd + i] - (dil[i] * (block[i] - 1) + 1)) // strides[i] + 1
                            for i in range(nd)]))
        x = values(rng, (2, c * int(np.prod(block)), cols), np.float32)
        y = col2im(x, image, block, dil, pads, strides).astype(np.float32)
        wc(out, f"test_col2im_{name}", 18, _node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], **attrs),
           [("x", x), ("image_shape", np.array(image, np.int64)), ("block_shape", np.array(block, np.int64))],
           [("y", y)])
    x = rng.integers(-50, 50, (1, 4, 16)).astype(np.int32)
    wc(out, "test_col2im_int32", 18, _node("Col2Im", ["x", "image_shape", "block_shape"], ["y"]),
       [("x", x), ("image_shape", np.array([5, 5], np.int64)), ("block_shape", np.array([2, 2], np.int64))],
       [("y", col2im(x, [5, 5], [2, 2], [1, 1], [0] * 4, [1, 1]).astype(np.int32))])

    # CenterCropPad-18: crop, pad, mixed, odd differences, axes subsets.
    ccp = (
        ("crop", (6, 7, 3), [4, 4, 3], None),
        ("pad", (3, 2, 2), [6, 5, 2], None),
        ("mixed_odd", (5, 4, 3), [2, 7, 3], None),
        ("axes_hw", (2, 7, 6, 3), [4, 9], [1, 2]),
        ("axes_neg", (3, 5, 4), [6, 1], [-1, -2]),
    )
    for name, shape, target, axes in ccp:
        x = values(rng, shape, np.float32)
        ax = axes if axes is not None else list(range(len(shape)))
        y = center_crop_pad(x, target, [a % len(shape) for a in ax])
        attrs = {} if axes is None else {"axes": axes}
        wc(out, f"test_center_crop_pad_{name}", 18, _node("CenterCropPad", ["x", "shape"], ["y"], **attrs),
           [("x", x), ("shape", np.array(target, np.int64))], [("y", y)])
    x = rng.integers(0, 100, (4, 5)).astype(np.uint8)
    wc(out, "test_center_crop_pad_uint8_int32_shape", 18, _node("CenterCropPad", ["x", "shape"], ["y"]),
       [("x", x), ("shape", np.array([7, 2], np.int32))], [("y", center_crop_pad(x, [7, 2], [0, 1]))])

    # AffineGrid-20: 2-D and 3-D, align_corners 0 and 1.
    for align in (0, 1):
        theta = rng.uniform(-1, 1, (2, 2, 3)).astype(np.float32)
        size = [2, 3, 4, 5]
        wc(out, f"test_affine_grid_2d_align{align}", 20,
           _node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
           [("theta", theta), ("size", np.array(size, np.int64))],
           [("grid", affine_grid(theta, size, align).astype(np.float32))])
        theta = rng.uniform(-1, 1, (1, 3, 4)).astype(np.float64)
        size = [1, 1, 3, 2, 4]
        wc(out, f"test_affine_grid_3d_align{align}", 20,
           _node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
           [("theta", theta), ("size", np.array(size, np.int64))], [("grid", affine_grid(theta, size, align))])
    theta = rng.uniform(-1, 1, (1, 2, 3)).astype(np.float32)
    wc(out, "test_affine_grid_2d_unit_dims", 20, _node("AffineGrid", ["theta", "size"], ["grid"], align_corners=1),
       [("theta", theta), ("size", np.array([1, 2, 1, 3], np.int64))],
       [("grid", affine_grid(theta, [1, 2, 1, 3], 1).astype(np.float32))])

    # TensorScatter-24: linear / circular, default and explicit axis, with
    # and without write_indices.
    past = values(rng, (2, 3, 6, 4), np.float32)
    upd = values(rng, (2, 3, 2, 4), np.float32)
    wi = np.array([1, 4], np.int64)
    wc(out, "test_tensorscatter_linear", 24,
       _node("TensorScatter", ["past", "update", "wi"], ["present"]),
       [("past", past), ("update", upd), ("wi", wi)], [("present", tensor_scatter(past, upd, wi, -2, False))])
    wc(out, "test_tensorscatter_no_indices", 24, _node("TensorScatter", ["past", "update"], ["present"]),
       [("past", past), ("update", upd)], [("present", tensor_scatter(past, upd, None, -2, False))])
    wi = np.array([5, 3], np.int64)
    wc(out, "test_tensorscatter_circular", 24,
       _node("TensorScatter", ["past", "update", "wi"], ["present"], mode="circular"),
       [("past", past), ("update", upd), ("wi", wi)], [("present", tensor_scatter(past, upd, wi, -2, True))])
    past = values(rng, (2, 5, 3), np.float16)
    upd = values(rng, (2, 3, 3), np.float16)
    wi = np.array([2, 0], np.int64)
    wc(out, "test_tensorscatter_axis1_float16", 24,
       _node("TensorScatter", ["past", "update", "wi"], ["present"], axis=1),
       [("past", past), ("update", upd), ("wi", wi)], [("present", tensor_scatter(past, upd, wi, 1, False))])

    # StringConcat-20 with broadcasting; StringSplit-20 by delimiter and by
    # whitespace, with maxsplit; RegexFullMatch-20 (RE2 syntax; expected
    # values from Python's re, which agrees with RE2 on these patterns).
    xa = np.array([["a", "", "xyz"], ["é", "b c", "d"]], dtype=object)
    xb = np.array(["1", "-", ""], dtype=object)
    wc(out, "test_string_concat_broadcast", 20, _node("StringConcat", ["x", "y"], ["z"]), [("x", xa), ("y", xb)],
       [("z", np.array([[u + v for u, v in zip(r, xb)] for r in xa], dtype=object))])
    texts = np.array([["a,b,,c", ""], [",x,", "no"]], dtype=object)
    for name, attrs in (("delim", {"delimiter": ","}), ("delim_max1", {"delimiter": ",", "maxsplit": 1}),
                        ("multichar", {"delimiter": ",,"})):
        parts = [[t.split(attrs["delimiter"], attrs.get("maxsplit", -1)) for t in r] for r in texts]
        most = max(len(q) for r in parts for q in r)
        y = np.array([[q + [""] * (most - len(q)) for q in r] for r in parts], dtype=object)
        z = np.array([[len(q) for q in r] for r in parts], np.int64)
        wc(out, f"test_string_split_{name}", 20, _node("StringSplit", ["x"], ["y", "z"], **attrs), [("x", texts)],
           [("y", y), ("z", z)])
    texts = np.array(["  hello   world  ", "one", "", " \t a\nb c "], dtype=object)
    for name, attrs in (("whitespace", {}), ("whitespace_max1", {"maxsplit": 1}), ("empty_delim", {"delimiter": ""})):
        parts = [t.split(None, attrs.get("maxsplit", -1)) for t in texts]
        most = max(len(q) for q in parts)
        y = np.array([q + [""] * (most - len(q)) for q in parts], dtype=object)
        z = np.array([len(q) for q in parts], np.int64)
        wc(out, f"test_string_split_{name}", 20, _node("StringSplit", ["x"], ["y", "z"], **attrs), [("x", texts)],
           [("y", y), ("z", z)])
    import re
    words = np.array([["ab@cd.com", "a.c", "abc", "abab c"], ["xyz", "ab1", "é9", "a\nc"]], dtype=object)
    for i, pat in enumerate((r"\w+@\w+\.com", r"a.c", r"(?:ab)+?c", r"[a-z]{2,3}\d*", r"x|yz|ab\d", r"a\sc|[^b]+",
                             r"[[:alpha:]]+", r"\S*")):
        # Patterns that can match any one character run on ASCII text only
        # (see RegexFullMatch in src/ops/ref/newer.c).
        xw = words if i in (0, 3, 4, 6) else np.array([w for w in words.ravel() if w.isascii()], dtype=object)
        py = pat.replace("[[:alpha:]]", "[A-Za-z]")  # RE2's POSIX class, which Python's re lacks
        y = np.vectorize(lambda w: re.fullmatch(py, w) is not None, otypes=[np.bool_])(xw)
        wc(out, f"test_regex_full_match_{i}", 20, _node("RegexFullMatch", ["x"], ["y"], pattern=pat), [("x", xw)],
           [("y", y)])

    # ---- ai.onnx.ml ----

    # Binarizer-1.
    for dtype, th in ((np.float32, None), (np.float64, 0.5), (np.int64, 2.0), (np.int32, -1.0)):
        x = values(rng, (3, 5), dtype) if np.issubdtype(dtype, np.floating) else rng.integers(-4, 5, (3, 5)).astype(dtype)
        t = 0.0 if th is None else float(np.float32(th))
        attrs = {} if th is None else {"threshold": th}
        wc(out, f"test_ai_onnx_ml_binarizer_{np.dtype(dtype).name}", 17,
           _node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", **attrs), [("x", x)],
           [("y", np.where(x.astype(np.float64) > t, 1, 0).astype(dtype))], opsets={"ai.onnx.ml": 1})

    # ArrayFeatureExtractor-1.
    x = values(rng, (3, 5), np.float32)
    ind = np.array([4, 0, 2, 2], np.int64)
    wc(out, "test_ai_onnx_ml_array_feature_extractor_2d", 17,
       _node("ArrayFeatureExtractor", ["x", "y"], ["z"], domain="ai.onnx.ml"), [("x", x), ("y", ind)],
       [("z", x[..., ind])], opsets={"ai.onnx.ml": 1})
    x = rng.integers(0, 9, (2, 3, 4)).astype(np.int64)
    ind = np.array([[3, 1]], np.int64)
    wc(out, "test_ai_onnx_ml_array_feature_extractor_3d_int64", 17,
       _node("ArrayFeatureExtractor", ["x", "y"], ["z"], domain="ai.onnx.ml"), [("x", x), ("y", ind)],
       [("z", x[..., [3, 1]])], opsets={"ai.onnx.ml": 1})
    x = np.array(["a", "bb", "ccc", "d"], dtype=object)
    wc(out, "test_ai_onnx_ml_array_feature_extractor_1d_string", 17,
       _node("ArrayFeatureExtractor", ["x", "y"], ["z"], domain="ai.onnx.ml"),
       [("x", x), ("y", np.array([2, 0], np.int64))], [("z", np.array([["ccc", "a"]], dtype=object))],
       opsets={"ai.onnx.ml": 1})

    # LabelEncoder-1: strings to class indices and back.
    classes = ["cat", "dog", "bird"]
    x = np.array([["dog", "fish"], ["bird", "cat"]], dtype=object)
    wc(out, "test_ai_onnx_ml_label_encoder_v1_string_to_int", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", classes_strings=classes, default_int64=-7),
       [("x", x)], [("y", np.array([[1, -7], [2, 0]], np.int64))], opsets={"ai.onnx.ml": 1})
    x = np.array([2, 0, 5, -1], np.int64)
    wc(out, "test_ai_onnx_ml_label_encoder_v1_int_to_string", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", classes_strings=classes),
       [("x", x)], [("y", np.array(["bird", "cat", "_Unused", "_Unused"], dtype=object))], opsets={"ai.onnx.ml": 1})
    # LabelEncoder-2: keys_* / values_* lists with defaults.
    x = np.array(["Amy", "Dori", "Sally", "Amy"], dtype=object)
    wc(out, "test_ai_onnx_ml_label_encoder_v2_string_int", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_strings=["Amy", "Sally"], values_int64s=[5, 6],
             default_int64=-1), [("x", x)], [("y", np.array([5, -1, 6, 5], np.int64))], opsets={"ai.onnx.ml": 2})
    x = np.array([[1.5, 2.0], [7.0, -0.0]], np.float32)
    wc(out, "test_ai_onnx_ml_label_encoder_v2_float_string", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_floats=[1.5, 0.0, 7.0],
             values_strings=["a", "zero", "c"], default_string="?"),
       [("x", x)], [("y", np.array([["a", "?"], ["c", "zero"]], dtype=object))], opsets={"ai.onnx.ml": 2})
    x = np.array([3, 1, 9], np.int64)
    wc(out, "test_ai_onnx_ml_label_encoder_v2_int_float_default", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_int64s=[1, 3], values_floats=[0.25, 0.5]),
       [("x", x)], [("y", np.array([0.5, 0.25, -0.0], np.float32))], opsets={"ai.onnx.ml": 2})
    # LabelEncoder-4: keys / values / default as tensors of wider types.
    keys = numpy_helper.from_array(np.array([10, 20, 30], np.int32), "keys")
    vals = numpy_helper.from_array(np.array([1.5, 2.5, 3.5], np.float64), "values")
    dflt = numpy_helper.from_array(np.array([-9.0], np.float64), "default")
    x = np.array([[20, 11], [30, 10]], np.int32)
    wc(out, "test_ai_onnx_ml_label_encoder_v4_tensor_int32_double", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_tensor=keys, values_tensor=vals,
             default_tensor=dflt), [("x", x)], [("y", np.array([[2.5, -9.0], [3.5, 1.5]]))], opsets=ML)
    keys = numpy_helper.from_array(np.array([1.0, np.nan], np.float64), "keys")
    vals = numpy_helper.from_array(np.array([4, 5], np.int16), "values")
    x = np.array([np.nan, 1.0, 2.0], np.float64)
    wc(out, "test_ai_onnx_ml_label_encoder_v4_nan_key_int16", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_tensor=keys, values_tensor=vals),
       [("x", x)], [("y", np.array([5, 4, -1], np.int16))], opsets=ML)
    wc(out, "test_ai_onnx_ml_label_encoder_v4_string_lists", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_strings=["a", "b"], values_strings=["x", "y"]),
       [("x", np.array(["b", "c"], dtype=object))], [("y", np.array(["y", "_Unused"], dtype=object))], opsets=ML)

    # TreeEnsemble-5: two trees over three features, every comparison mode,
    # set membership, missing values, each aggregate and post transform.
    base = {
        "nodes_featureids": [0, 1, 2, 2, 0, 1, 2],
        "nodes_modes": [0, 6, 3, 2, 4, 5, 1],
        "nodes_splits": [0.5, 0.0, -0.25, 1.0, 2.0, 0.3, 0.0],
        "nodes_truenodeids": [1, 0, 1, 4, 3, 6, 5],
        "nodes_trueleafs": [0, 1, 1, 0, 1, 0, 1],
        "nodes_falsenodeids": [2, 1, 2, 5, 4, 4, 3],
        "nodes_falseleafs": [0, 1, 1, 0, 1, 1, 1],
        "nodes_missing_value_tracks_true": [1, 0, 0, 1, 0, 0, 0],
        "membership_values": [1.0, 2.0, np.nan],
        "leaf_targetids": [0, 1, 1, 0, 1, 0],
        "leaf_weights": [1.0, -2.0, 0.5, 3.0, 0.25, -1.5],
        "tree_roots": [0, 3],
        "n_targets": 2,
    }
    x = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0, 0.3, np.nan, -0.25], size=(12, 3)).astype(np.float32)
    variants = (("sum", {}), ("average", {"aggregate_function": 0}), ("min", {"aggregate_function": 2}),
                ("max", {"aggregate_function": 3}), ("softmax", {"post_transform": 1}),
                ("logistic", {"post_transform": 2}))
    for name, extra in variants:
        t = dict(base, **extra)
        for dtype, dname in ((np.float32, ""), (np.float64, "_double")):
            if dname and name not in ("sum",):
                continue
            xv = x.astype(dtype)
            y = tree_predict(xv, t).astype(dtype)
            attrs = {k: v for k, v in t.items() if k not in ("nodes_modes", "nodes_splits", "leaf_weights", "membership_values")}
            attrs["nodes_modes"] = numpy_helper.from_array(np.array(t["nodes_modes"], np.uint8), "nodes_modes")
            attrs["nodes_splits"] = numpy_helper.from_array(np.array(t["nodes_splits"], dtype), "nodes_splits")
            attrs["leaf_weights"] = numpy_helper.from_array(np.array(t["leaf_weights"], dtype), "leaf_weights")
            attrs["membership_values"] = numpy_helper.from_array(np.array(t["membership_values"], dtype), "members")
            wc(out, f"test_ai_onnx_ml_tree_ensemble_{name}{dname}", 21,
               _node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs), [("x", xv)], [("y", y)], opsets=ML5)

    # BitCast-26 on the packed types: the same codes under another type of
    # the same bit width (odd counts leave a padding nibble or crumb).
    def packed(t, bits, shape, codes):
        per = 8 // bits
        raw = bytearray((len(codes) + per - 1) // per)
        for i, c in enumerate(codes):
            raw[i // per] |= (c & ((1 << bits) - 1)) << (bits * (i % per))
        tp = onnx.TensorProto()
        tp.data_type = t
        tp.dims.extend(shape)
        tp.raw_data = bytes(raw)
        return tp

    INT4, UINT4, FLOAT4E2M1, UINT2, INT2 = 22, 21, 23, 25, 26
    codes4 = [0, 1, 7, 8, 9, 15, 3]
    codes2 = [0, 1, 2, 3, 2]
    for src, dst, bits, codes, shape in ((INT4, UINT4, 4, codes4, [7]), (UINT4, FLOAT4E2M1, 4, codes4, [7]),
                                         (FLOAT4E2M1, INT4, 4, codes4[:6], [2, 3]), (INT2, UINT2, 2, codes2, [5])):
        wc(out, f"test_bitcast_packed_{src}_to_{dst}", 26, _node("BitCast", ["x"], ["y"], to=dst),
           [("x", packed(src, bits, shape, codes))], [("y", packed(dst, bits, shape, codes))], ir_version=11)

    # LabelEncoder with a map large enough that order matters: keys given
    # unsorted, misses between and beyond them, -0.0 matching 0.0 and NaN
    # matching the NaN key (looked up in a table sorted at load).
    keys = np.array(rng.permutation(np.arange(-300, 300, 3)), np.int64)
    x = np.arange(-305, 305, 1, dtype=np.int64)
    lookup = {int(k): i for i, k in enumerate(keys)}
    wc(out, "test_ai_onnx_ml_label_encoder_v2_many_int_keys", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_int64s=[int(k) for k in keys],
             values_int64s=list(range(len(keys))), default_int64=-1),
       [("x", x)], [("y", np.array([lookup.get(int(v), -1) for v in x], np.int64))], opsets={"ai.onnx.ml": 2})
    words = [f"w{int(k)}" for k in rng.permutation(200)]
    x = np.array([f"w{i}" for i in range(-3, 203, 2)] + ["", "w"], dtype=object)
    lookup = {w: float(i) * 0.5 for i, w in enumerate(words)}
    wc(out, "test_ai_onnx_ml_label_encoder_v2_many_string_keys", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_strings=words,
             values_floats=[lookup[w] for w in words], default_float=-2.0),
       [("x", x)], [("y", np.array([lookup.get(w, -2.0) for w in x], np.float32))], opsets={"ai.onnx.ml": 2})
    keys = numpy_helper.from_array(np.array([5.5, np.nan, 0.0, -1.25, 3.0, 2.5], np.float64), "keys")
    vals = numpy_helper.from_array(np.array([1, 2, 3, 4, 5, 6], np.int64), "values")
    x = np.array([np.nan, -0.0, 0.0, 3.0, 2.5, -1.25, 5.5, 4.0, -np.inf], np.float64)
    wc(out, "test_ai_onnx_ml_label_encoder_v4_sorted_float_keys", 17,
       _node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_tensor=keys, values_tensor=vals),
       [("x", x)], [("y", np.array([2, 3, 3, 5, 6, 4, 1, -1, -1], np.int64))], opsets=ML)
