#!/usr/bin/python3
"""Writes the identity-like tiny model the serving benchmark uses.

The model does almost nothing (Identity on a float32 [batch, 4] tensor), so
a benchmark against it measures the server itself: transport, codecs,
queueing and batching, not kernels. Input "input", output "output", dynamic
batch axis, opset 13.

Generated, not committed (python3-onnx from Debian):

    /usr/bin/python3 tools/make_tiny_model.py OUTDIR     # writes OUTDIR/tiny.onnx
"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUTDIR")
    out = sys.argv[1]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"], name="identity")],
        "tiny_identity",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="mcp2026-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "tiny.onnx")
    onnx.save(model, path)
    print(path)


if __name__ == "__main__":
    main()
