#!/usr/bin/python3
"""Writes the sandbox probe models into OUTDIR.

    /usr/bin/python3 tools/make_sandbox_model.py OUTDIR

Generated at test time (Debian python3-onnx), never committed; served by
mcp2026-server-probe (tests/sandbox/), whose test-only kernel runs them:

- probe_socket.onnx, probe_exec.onnx, probe_open.onnx: input "x" FP32
  [1, 4] -> output "y" FP32 [1, 4], one SandboxProbe node (domain
  mcp.test, opset 1) whose `action` attribute (socket, exec, open) names
  the system call it tries before copying x to y.
- wide.onnx: input "x" FP32 [n, 512] -> output "y" FP32 [n, 512], x times
  a 512 x 512 weight (1 MiB) of ones/512, for the per-model memory limit
  (resources.memory): its load needs over 1 MiB, and a large n needs
  several MiB more per run.

onnx.checker knows no schema for the mcp.test domain, so it checks the
models' structure only (check_model with full_check off does not look up
schemas of domains it does not know).

Prints one line per file written. Exits non-zero with a message when OUTDIR
cannot be written.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from make_e2e_models import save

OPSET = 17
IR_VERSION = 8
PROBE_DOMAIN = "mcp.test"
ACTIONS = ("socket", "exec", "open")


def probe_model(action):
    node = helper.make_node("SandboxProbe", ["x"], ["y"], name=f"probe_{action}", domain=PROBE_DOMAIN,
                            action=action)
    graph = helper.make_graph([node], f"probe_{action}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                   helper.make_opsetid(PROBE_DOMAIN, 1)],
                             ir_version=IR_VERSION, producer_name="make_sandbox_model")


def wide_model():
    w = numpy_helper.from_array(np.full((512, 512), 1.0 / 512, dtype=np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="wide")
    graph = helper.make_graph([node], "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 512])], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                             producer_name="make_sandbox_model")


def main(argv):
    if len(argv) != 2:
        print("usage: make_sandbox_model.py OUTDIR", file=sys.stderr)
        return 2
    outdir = argv[1]
    try:
        os.makedirs(outdir, exist_ok=True)
        for action in ACTIONS:
            save(probe_model(action), outdir, f"probe_{action}.onnx")
        save(wide_model(), outdir, "wide.onnx")
    except OSError as e:
        print(f"make_sandbox_model.py: {outdir}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
