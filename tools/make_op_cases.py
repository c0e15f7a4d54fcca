#!/usr/bin/python3
"""Test cases for operators newer than Debian's ONNX backend test suite
(libonnx-testdata, ONNX 1.12, opsets up to 17), in that suite's layout so
mcp-conformance runs them: OUTDIR/node/<case>/model.onnx and
test_data_set_0/{input,output}_N.pb. Each case follows the operator's
definition in the ONNX specification; the expected outputs are computed
here with numpy in float64 and rounded to the output's type.

    /usr/bin/python3 tools/make_op_cases.py OUTDIR

Debian's python3-onnx predates these opsets: models are built with its
helpers and not checked against its (older) schemas.

Cases are grouped by operator family: this file holds the activations and
the shared writer; each tools/op_cases_<family>.py defines
cases(out, rng, lib), lib being this module, and is run in name order.
"""
import glob
import importlib.util
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
             np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8, np.int16: TensorProto.INT16,
             np.uint16: TensorProto.UINT16, np.int32: TensorProto.INT32, np.uint32: TensorProto.UINT32,
             np.int64: TensorProto.INT64, np.uint64: TensorProto.UINT64, np.bool_: TensorProto.BOOL,
             np.object_: TensorProto.STRING, np.str_: TensorProto.STRING}


def write_case(out, name, opset, node, inputs, outputs, initializers=(), opsets=None, ir_version=8, functions=()):
    """inputs / outputs: lists of (name, numpy array); node: one node or a
    list of them; initializers: TensorProtos; opsets: extra {domain: version};
    functions: the model's local FunctionProtos."""
    case = os.path.join(out, "node", name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    # An array may also come as a TensorProto built by hand (types this
    # onnx has no numpy dtype for): its data_type and dims are declared.
    info = lambda n, a: (helper.make_tensor_value_info(n, a.data_type, list(a.dims)) if isinstance(a, TensorProto)
                         else helper.make_tensor_value_info(n, ONNX_TYPE[a.dtype.type], list(a.shape)))
    nodes = node if isinstance(node, list) else [node]
    graph = helper.make_graph(nodes, name, [info(n, a) for n, a in inputs], [info(n, a) for n, a in outputs],
                              initializer=list(initializers))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in (opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=imports)
    model.functions.extend(functions)
    model.ir_version = ir_version
    with open(os.path.join(case, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(tensors):
            with open(os.path.join(data, f"{kind}_{i}.pb"), "wb") as f:
                if isinstance(a, TensorProto):
                    a.name = n
                f.write((a if isinstance(a, TensorProto) else numpy_helper.from_array(a, n)).SerializeToString())


def values(rng, shape, dtype):
    """Random normal values with the edges a kernel gets wrong: zero, both
    signs far out (exp overflow), and small magnitudes."""
    x = rng.standard_normal(shape) * 3
    flat = x.reshape(-1)
    flat[:6] = [0.0, -0.0, 30.0, -30.0, 1e-4, -1e-4][: flat.size]
    return x.astype(dtype)


def softplus(x):
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


def sigmoid(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(np.minimum(x, 0)) / (1 + np.exp(np.minimum(x, 0))))


def main(out):
    for suite in ("node", "pytorch-converted", "pytorch-operator", "simple"):
        os.makedirs(os.path.join(out, suite), exist_ok=True)
    rng = np.random.default_rng(2026)

    # Mish-18 and -22: y = x * tanh(softplus(x)).
    for opset, dtype, suffix in ((18, np.float32, ""), (22, np.float32, "_22"), (18, np.float64, "_double")):
        x = values(rng, (3, 4, 5), dtype)
        x64 = x.astype(np.float64)
        y = (x64 * np.tanh(softplus(x64))).astype(dtype)
        write_case(out, f"test_mish{suffix}", opset, helper.make_node("Mish", ["x"], ["y"]), [("x", x)], [("y", y)])

    # Swish-24: y = x * sigmoid(alpha * x), alpha default 1.
    for alpha, dtype, suffix in ((None, np.float32, ""), (0.5, np.float32, "_alpha"), (2.0, np.float64, "_double")):
        x = values(rng, (2, 3, 7), dtype)
        x64 = x.astype(np.float64)
        a = 1.0 if alpha is None else float(np.float32(alpha))
        y = (x64 * sigmoid(a * x64)).astype(dtype)
        attrs = {} if alpha is None else {"alpha": alpha}
        write_case(out, f"test_swish{suffix}", 24, helper.make_node("Swish", ["x"], ["y"], **attrs), [("x", x)],
                   [("y", y)])


    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "op_cases_*.py"))):
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        family = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(family)
        family.cases(out, np.random.default_rng(2026), sys.modules[__name__])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_op_cases.py OUTDIR")
    main(sys.argv[1])
