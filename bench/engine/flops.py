#!/usr/bin/python3
"""FLOPs of one inference (Conv, ConvTranspose, Gemm, MatMul, MatMulInteger,
4-D Attention; 2 per MAC) at a
given batch, from ONNX shape inference.  flops.py MODEL.onnx BATCH"""
import sys

import numpy as np
import onnx
from onnx import shape_inference


def main():
    model = onnx.load(sys.argv[1])
    batch = int(sys.argv[2])
    for i in model.graph.input:
        d = i.type.tensor_type.shape.dim
        if d and not d[0].dim_value:
            d[0].dim_value = batch
    model = shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    for t in model.graph.initializer:
        shapes[t.name] = list(t.dims)
    total = 0
    for n in model.graph.node:
        if n.op_type in ("Conv", "ConvTranspose") and shapes.get(n.output[0]) and shapes.get(n.input[1]):
            w = shapes[n.input[1]]
            out = shapes[n.output[0]] if n.op_type == "Conv" else shapes[n.input[0]]
            total += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul", "MatMulInteger") and shapes.get(n.output[0]) and shapes.get(n.input[0]):
            k = shapes[n.input[0]][-1]
            if n.op_type == "Gemm" and any(a.name == "transA" and a.i for a in n.attribute):
                k = shapes[n.input[0]][0]
            total += 2 * int(np.prod(shapes[n.output[0]])) * k
        elif n.op_type == "Attention" and len(shapes.get(n.input[0], [])) == 4 and shapes.get(n.input[1]):
            b, h, s, d = shapes[n.input[0]]  # 4-D Q, K, V: (batch, heads, sequence, head size)
            total += 2 * b * h * s * shapes[n.input[1]][2] * (d + shapes[n.input[2]][3])
    print(total)


if __name__ == "__main__":
    main()
