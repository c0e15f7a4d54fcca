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


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    names = sys.argv[2:] or list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model '{n}' (known: {', '.join(MODELS)})")
        export(n, out_dir)


if __name__ == "__main__":
    main()
