#!/usr/bin/python3
"""Exports the engine benchmark models to ONNX (Debian python3-torch and
python3-torchvision; random weights, fixed seed; dynamic batch axis).

    /usr/bin/python3 tools/export_bench_models.py OUTDIR [name ...]

For each model it writes OUTDIR/<name>.onnx, OUTDIR/<name>.input.npy (batch
2) and OUTDIR/<name>.output.npy (torch's own output on that input), so the
engine's results can be checked against torch. BatchNorm statistics are
calibrated on random inputs so that activations keep their scale. Nothing here is committed:
the bench script runs this into its cache folder.
"""
import os
import re
import sys

import numpy as np
import torch
import torchvision


class BertLike(torch.nn.Module):
    """A 4-layer BERT-base-like encoder: d_model 768, 12 heads, FFN 3072."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, dropout=0.0,
                                                 activation="gelu", batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


MODELS = {
    # name: (constructor, input shape without batch)
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), (3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (3, 224, 224)),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), (3, 224, 224)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), (3, 224, 224)),
    "bert_like": (BertLike, (128, 768)),
    "mlp": (mlp, (784,)),
}


def calibrate_batchnorm(model, shape):
    """Sets every BatchNorm's running statistics from random inputs.

    With fresh running statistics (mean 0, variance 1) the activations of the
    deep CNNs shrink layer by layer (MobileNetV2's outputs come out near 1e-9,
    EfficientNet-B0's near 1e-14), which would make comparing outputs with
    torch's meaningless. Statistics measured on the inputs keep every layer's
    activations near unit scale, as a trained model's are.
    """
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
        m.train()
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, *shape, generator=gen))
    model.eval()


def export(name, out_dir):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    calibrate_batchnorm(model, shape)
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(1))
    path = os.path.join(out_dir, f"{name}.onnx")
    with torch.no_grad():
        y = model(x)
    # Exported with gradients enabled: torch then stays off its fused
    # inference kernels (transformer layers), which ONNX cannot express.
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"], opset_version=14,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, do_constant_folding=True)
    np.save(os.path.join(out_dir, f"{name}.input.npy"), x.numpy())
    np.save(os.path.join(out_dir, f"{name}.output.npy"), y.numpy())
    print(f"{name}: {path} ({os.path.getsize(path) / 1e6:.1f} MB)")


# attention[_causal][_decomposed]_S: scaled dot-product self-attention over
# (batch, 12 heads, S, 64), the one input as Q, K and V: one ONNX
# Attention-23 node, or the subgraph exporters write without it (Transpose,
# MatMul, Mul by the scale, Add of a causal mask constant, Softmax, MatMul).
ATTENTION = re.compile(r"attention(_causal)?(_decomposed)?_(\d+)$")


def export_attention(name, out_dir):
    from onnx import TensorProto, helper, numpy_helper, save
    causal, decomposed, seq = ATTENTION.match(name).groups()
    seq, heads, d = int(seq), 12, 64
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", heads, seq, d]) for n in ("input", "output")]
    if decomposed:
        inits = [numpy_helper.from_array(np.array(1 / np.sqrt(d), dtype=np.float32), "scale")]
        nodes = [helper.make_node("Transpose", ["input"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["input", "kt"], ["qk"]),
                 helper.make_node("Mul", ["qk", "scale"], ["s"])]
        if causal:
            mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), k=1)
            inits.append(numpy_helper.from_array(mask, "mask"))
            nodes.append(helper.make_node("Add", ["s", "mask"], ["sm"]))
        nodes += [helper.make_node("Softmax", ["sm" if causal else "s"], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "input"], ["output"])]
        opset = 17
    else:
        inits = []
        nodes = [helper.make_node("Attention", ["input", "input", "input"], ["output"], is_causal=int(bool(causal)))]
        opset = 23
    model = helper.make_model(helper.make_graph(nodes, name, io[:1], io[1:], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset >= 23 else 8
    path = os.path.join(out_dir, f"{name}.onnx")
    save(model, path)
    x = torch.randn(2, heads, seq, d, generator=torch.Generator().manual_seed(1))
    xd = x.double()
    scores = xd @ xd.transpose(2, 3) / np.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    y = torch.softmax(scores, dim=-1) @ xd
    np.save(os.path.join(out_dir, f"{name}.input.npy"), x.numpy())
    np.save(os.path.join(out_dir, f"{name}.output.npy"), y.float().numpy())
    print(f"{name}: {path}")


# attention_decode_T: one decoding step of grouped-query attention, as an
# LLM runs it over a static cache: Q (batch, 32 heads, 1, 128) against K and
# V (1, 8 heads, T, 128), one Attention-23 node.
DECODE = re.compile(r"attention_decode_(\d+)$")


def export_decode(name, out_dir):
    from onnx import TensorProto, helper, save
    t = int(DECODE.match(name).group(1))
    ins = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 32, 1, 128]),
           helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 8, t, 128]),
           helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 8, t, 128])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 32, 1, 128])]
    model = helper.make_model(helper.make_graph([helper.make_node("Attention", ["input", "k", "v"], ["output"])],
                                                name, ins, out), opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    path = os.path.join(out_dir, f"{name}.onnx")
    save(model, path)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((1, 32, 1, 128), (1, 8, t, 128), (1, 8, t, 128)))
    kk, vv = np.repeat(k.astype(np.float64), 4, axis=1), np.repeat(v.astype(np.float64), 4, axis=1)
    sc = q.astype(np.float64) @ kk.transpose(0, 1, 3, 2) / np.sqrt(128)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    y = (p / p.sum(-1, keepdims=True)) @ vv
    for n, a in (("input", q), ("k", k), ("v", v), ("output", y.astype(np.float32))):
        np.save(os.path.join(out_dir, f"{name}.{n}.npy"), a)
    print(f"{name}: {path}")


# One-node models of the transformer and vision norms (opsets 21, 23):
# rmsnorm (batch, 512, 4096), groupnorm 32 groups over (batch, 256, 64, 64),
# rotary over (batch, 32 heads, 2048, 64) with position ids.
OPS = ("rmsnorm", "groupnorm", "rotary")


def export_op(name, out_dir):
    from onnx import TensorProto, helper, numpy_helper, save
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    extra_in, feeds = [], {}
    if name == "rmsnorm":
        shape, opset = [512, 4096], 23
        g = f32(4096)
        inits = [numpy_helper.from_array(g, "g")]
        node = helper.make_node("RMSNormalization", ["input", "g"], ["output"])
        ref = lambda x: x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * g
    elif name == "groupnorm":
        shape, opset = [256, 64, 64], 21
        sc, bi = f32(256), f32(256)
        inits = [numpy_helper.from_array(sc, "s"), numpy_helper.from_array(bi, "b")]
        node = helper.make_node("GroupNormalization", ["input", "s", "b"], ["output"], num_groups=32)

        def ref(x):
            g = x.reshape(x.shape[0], 32, -1)
            y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
            return y * sc.reshape(1, -1, 1, 1) + bi.reshape(1, -1, 1, 1)
    else:
        shape, opset = [32, 2048, 64], 23
        ang = np.arange(4096)[:, None] / (10000 ** (np.arange(0, 64, 2) / 64))[None, :]
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        inits = [numpy_helper.from_array(cos, "c"), numpy_helper.from_array(sin, "s")]
        extra_in = [helper.make_tensor_value_info("pos", TensorProto.INT64, ["batch", 2048])]
        node = helper.make_node("RotaryEmbedding", ["input", "c", "s", "pos"], ["output"])

        def ref(x):  # position ids all 1, as both benchmarks feed them
            c, s_ = cos[1].reshape(1, 1, 1, 32), sin[1].reshape(1, 1, 1, 32)
            x1, x2 = x[..., :32], x[..., 32:]
            return np.concatenate([c * x1 - s_ * x2, s_ * x1 + c * x2], axis=-1)
        feeds["pos"] = np.ones((2, 2048), dtype=np.int64)
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch"] + shape) for n in ("input", "output")]
    model = helper.make_model(helper.make_graph([node], name, io[:1] + extra_in, io[1:], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    path = os.path.join(out_dir, f"{name}.onnx")
    save(model, path)
    x = f32(2, *shape)
    np.save(os.path.join(out_dir, f"{name}.input.npy"), x)
    for k, v in feeds.items():
        np.save(os.path.join(out_dir, f"{name}.{k}.npy"), v)
    np.save(os.path.join(out_dir, f"{name}.output.npy"), ref(x.astype(np.float64)).astype(np.float32))
    print(f"{name}: {path}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    names = sys.argv[2:] or list(MODELS)
    for n in names:
        if ATTENTION.match(n):
            export_attention(n, out_dir)
            continue
        if n in OPS:
            export_op(n, out_dir)
            continue
        if DECODE.match(n):
            export_decode(n, out_dir)
            continue
        if n not in MODELS:
            sys.exit(f"unknown model '{n}' (known: {', '.join(MODELS)})")
        export(n, out_dir)


if __name__ == "__main__":
    main()
