#!/usr/bin/env bash
# Seeds of the .mcpir fuzz corpus: the digits demo and a small CNN (Conv,
# Relu, MaxPool, residual Add, Gemm), compiled for one thread by this
# checkout's mcpctl. The fuzz target rewrites the stamp to the machine it
# runs on, so the seeds exercise the compiled path anywhere.
#   make build && tests/fuzz/make_mcpir_corpus.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=tests/fuzz/corpus/mcpir
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
/usr/bin/python3 - "$TMP/cnn.onnx" <<'PY'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w = lambda name, *shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p", "w2"], ["c2"], pads=[1, 1, 1, 1]),
    helper.make_node("Add", ["c2", "p"], ["s"]),
    helper.make_node("GlobalAveragePool", ["s"], ["g"]),
    helper.make_node("Flatten", ["g"], ["f"]),
    helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
]
graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
                          [w("w1", 16, 3, 3, 3), w("b1", 16), w("w2", 16, 16, 3, 3), w("w3", 4, 16), w("b3", 4)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
open(sys.argv[1], "wb").write(model.SerializeToString())
PY
build/bin/mcpctl compile models/demo/digits.onnx --threads 1 -o "$OUT/digits.mcpir"
build/bin/mcpctl compile "$TMP/cnn.onnx" --threads 1 -o "$OUT/cnn.mcpir"
