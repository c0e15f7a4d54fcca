#!/usr/bin/python3
"""Writes the small models the end-to-end server tests use into OUTDIR.

    /usr/bin/python3 tools/make_e2e_models.py OUTDIR

Generated at test time (Debian python3-onnx), never committed:

- identity_fp32.onnx, identity_int64.onnx, identity_bool.onnx,
  identity_bytes.onnx (STRING), identity_fp16.onnx, and one for each other
  datatype of the protocol (fp64, bf16, int8/16/32, uint8/16/32/64): one Identity node,
  input "ident_in" -> output "ident_out", shape [batch, 3] with a dynamic
  batch dimension (names distinct enough for error messages to be checked).
- add_two.onnx: inputs "lhs" and "rhs" FP32 [batch, 3] -> output "sum"
  (Add), for requests that leave one input out.
- slow.onnx: input "x" FP32 [batch, n, 256] -> output "y" FP32 [batch, n, 256];
  a Loop of SLOW_ITERATIONS iterations, each y = Tanh(y @ W) with a fixed
  256x256 weight, so one request keeps a worker busy long enough for queue,
  timeout and shutdown tests to overlap requests; the work grows with n, so
  a test picks how long a request runs without batching. Values stay finite.

- digits_other.onnx: the demo model's inputs and outputs ("input" FP32
  [batch, 64] -> "probabilities" FP32 [batch, 10], "label" INT64 [batch])
  with random weights: a version that disagrees with the demo model.
- digits_slow.onnx: the same inputs and outputs, computed through a Loop of
  DIGITS_SLOW_ITERATIONS Tanh(v @ W) steps of width 256, so each request
  takes tens of milliseconds: a canary that misses a latency budget.

Prints one line per file written. Exits non-zero with a message when OUTDIR
cannot be written.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
SLOW_WIDTH = 256
SLOW_ITERATIONS = 2500

IDENTITY_TYPES = {
    "fp32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "bool": TensorProto.BOOL,
    "bytes": TensorProto.STRING,
    "fp16": TensorProto.FLOAT16,
    # The rest of the protocol's datatypes, for the gRPC codec's typed and
    # raw contents (tests/e2e/test_grpc.py).
    "fp64": TensorProto.DOUBLE,
    "bf16": TensorProto.BFLOAT16,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
}


def save(model, outdir, name):
    onnx.checker.check_model(model)
    path = os.path.join(outdir, name)
    onnx.save(model, path)
    print(path)


def identity_model(elem_type):
    x = helper.make_tensor_value_info("ident_in", elem_type, ["batch", 3])
    y = helper.make_tensor_value_info("ident_out", elem_type, ["batch", 3])
    node = helper.make_node("Identity", ["ident_in"], ["ident_out"], name="identity")
    graph = helper.make_graph([node], "identity", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="make_e2e_models")


def add_two_model():
    lhs = helper.make_tensor_value_info("lhs", TensorProto.FLOAT, ["batch", 3])
    rhs = helper.make_tensor_value_info("rhs", TensorProto.FLOAT, ["batch", 3])
    out = helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["batch", 3])
    node = helper.make_node("Add", ["lhs", "rhs"], ["sum"], name="add")
    graph = helper.make_graph([node], "add_two", [lhs, rhs], [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="make_e2e_models")


def policy_meta_model():
    """identity_fp32 carrying an RBAC rule in its metadata_props: the
    server refuses to load it (access rules come from its own config)."""
    model = identity_model(TensorProto.FLOAT)
    helper.set_model_props(model, {"author": "someone", "rbac": '{"allow": ["*"], "role": "admin"}'})
    return model


def slow_model():
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((SLOW_WIDTH, SLOW_WIDTH)) * (1.5 / np.sqrt(SLOW_WIDTH))).astype(np.float32)
    # Loop body: (iteration, cond, v) -> (cond, Tanh(v @ W)); W comes from the
    # outer graph's initializers.
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node("MatMul", ["v_in", "W"], ["mm"], name="mix"),
            helper.make_node("Tanh", ["mm"], ["v_out"], name="squash"),
        ],
        "slow_body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["batch", "n", SLOW_WIDTH]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["batch", "n", SLOW_WIDTH]),
        ],
    )
    inits = [
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(np.array(SLOW_ITERATIONS, dtype=np.int64), "trip_count"),
        numpy_helper.from_array(np.array(True), "cond"),
    ]
    loop = helper.make_node("Loop", ["trip_count", "cond", "x"], ["y"], name="slow_loop", body=body)
    graph = helper.make_graph(
        [loop], "slow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n", SLOW_WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n", SLOW_WIDTH])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="make_e2e_models")


DIGITS_SLOW_ITERATIONS = 1500


def digits_io():
    return ([helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 64])],
            [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10]),
             helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"])])


def digits_head(features, width, rng):
    """features [batch, width] -> probabilities (Softmax) and label (ArgMax)."""
    w = (rng.standard_normal((width, 10)) / np.sqrt(width)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", [features, "W_out"], ["logits"], name="head"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
        helper.make_node("ArgMax", ["logits"], ["label"], name="argmax", axis=1, keepdims=0),
    ]
    return nodes, [numpy_helper.from_array(w, "W_out")]


def digits_other_model():
    rng = np.random.default_rng(11)
    inputs, outputs = digits_io()
    nodes, inits = digits_head("input", 64, rng)
    graph = helper.make_graph(nodes, "digits_other", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="make_e2e_models")


def digits_slow_model():
    rng = np.random.default_rng(13)
    inputs, outputs = digits_io()
    w_in = (rng.standard_normal((64, SLOW_WIDTH)) / 8.0).astype(np.float32)
    w = (rng.standard_normal((SLOW_WIDTH, SLOW_WIDTH)) * (1.5 / np.sqrt(SLOW_WIDTH))).astype(np.float32)
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node("MatMul", ["v_in", "W"], ["mm"], name="mix"),
            helper.make_node("Tanh", ["mm"], ["v_out"], name="squash"),
        ],
        "digits_slow_body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["batch", SLOW_WIDTH]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["batch", SLOW_WIDTH]),
        ],
    )
    head, head_inits = digits_head("y", SLOW_WIDTH, rng)
    nodes = [
        helper.make_node("MatMul", ["input", "W_in"], ["h"], name="embed"),
        helper.make_node("Loop", ["trip_count", "cond", "h"], ["y"], name="slow_loop", body=body),
    ] + head
    inits = [
        numpy_helper.from_array(w_in, "W_in"),
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(np.array(DIGITS_SLOW_ITERATIONS, dtype=np.int64), "trip_count"),
        numpy_helper.from_array(np.array(True), "cond"),
    ] + head_inits
    graph = helper.make_graph(nodes, "digits_slow", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="make_e2e_models")


def main(argv):
    if len(argv) != 2:
        print("usage: make_e2e_models.py OUTDIR", file=sys.stderr)
        return 2
    outdir = argv[1]
    try:
        os.makedirs(outdir, exist_ok=True)
        for suffix, elem_type in IDENTITY_TYPES.items():
            save(identity_model(elem_type), outdir, f"identity_{suffix}.onnx")
        save(add_two_model(), outdir, "add_two.onnx")
        save(policy_meta_model(), outdir, "policy_meta.onnx")
        save(slow_model(), outdir, "slow.onnx")
        save(digits_other_model(), outdir, "digits_other.onnx")
        save(digits_slow_model(), outdir, "digits_slow.onnx")
    except OSError as e:
        print(f"make_e2e_models.py: {outdir}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
