#!/usr/bin/env python3
"""Static QDQ quantization of an fp32 ONNX model, for the int8 benchmarks.

    tools/quantize_qdq.py MODEL.onnx OUT.onnx --mcpctl build/bin/mcpctl [--samples 8]

Writes a standard QDQ model (QuantizeLinear / DequantizeLinear pairs, the
format ONNX Runtime also runs): every float activation read by a Conv,
MatMul or Add is quantized to uint8 with its range calibrated on random
normal inputs (plus INPUT.npy files named with --input), weights of Conv
(per output channel) and of MatMul (per tensor) to symmetric int8, Conv
biases to int32 in the scale x_scale * w_scale. Calibration runs the model
on this engine (`mcpctl run`) with every quantized activation added as an
output. Needs Debian's python3-onnx and numpy only.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def activations_to_quantize(graph):
    inits = {t.name for t in graph.initializer}
    want = []
    for n in graph.node:
        ins = []
        if n.op_type in ("Conv", "MatMul") and n.input:
            ins = [n.input[0]]
        elif n.op_type == "Add":
            ins = [i for i in n.input if i not in inits]
            if len(ins) != 2:
                ins = []
        for i in ins:
            if i and i not in inits and i not in want:
                want.append(i)
    return want


def calibrate(model, names, mcpctl, samples, inputs, seed):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    # Plain output names, so mcpctl run writes calib_<i>.npy.
    for i, name in enumerate(names):
        m.graph.node.append(helper.make_node("Identity", [name], ["calib_%d" % i]))
        m.graph.output.append(helper.make_tensor_value_info("calib_%d" % i, TensorProto.FLOAT, None))
    rng = np.random.default_rng(seed)
    lo = {n: np.inf for n in names}
    hi = {n: -np.inf for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calib.onnx")
        onnx.save(m, path)
        inp = model.graph.input[0]
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
        feeds = list(inputs) + [None] * samples
        for k, f in enumerate(feeds):
            x = np.load(f).astype(np.float32) if f else rng.standard_normal(dims).astype(np.float32)
            xf = os.path.join(tmp, "x.npy")
            np.save(xf, x)
            out = os.path.join(tmp, "out%d" % k)
            subprocess.run([mcpctl, "run", path, out, "%s=%s" % (inp.name, xf)], check=True,
                           stdout=subprocess.DEVNULL)
            for i, name in enumerate(names):
                v = np.load(os.path.join(out, "calib_%d.npy" % i))
                lo[name] = min(lo[name], float(v.min()))
                hi[name] = max(hi[name], float(v.max()))
    return lo, hi


def u8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--mcpctl", required=True)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    model = onnx.load(a.model)
    g = model.graph
    names = activations_to_quantize(g)
    lo, hi = calibrate(model, names, a.mcpctl, a.samples, a.input, a.seed)
    inits = {t.name: t for t in g.initializer}
    new_inits = []
    qparams = {}
    for name in names:
        s, z = u8_params(lo[name], hi[name])
        qparams[name] = (s, z)
        base = name.replace("/", "_").strip("_")
        new_inits.append(numpy_helper.from_array(np.array(s, np.float32), base + "_scale"))
        new_inits.append(numpy_helper.from_array(np.array(z, np.uint8), base + "_zp"))

    def dq_name(t):
        return t + "_dq"

    nodes = []
    # Graph inputs that are quantized get their pair first.
    graph_inputs = {i.name for i in g.input}
    for name in names:
        if name in graph_inputs:
            base = name.replace("/", "_").strip("_")
            nodes.append(helper.make_node("QuantizeLinear", [name, base + "_scale", base + "_zp"], [name + "_q"]))
            nodes.append(helper.make_node("DequantizeLinear", [name + "_q", base + "_scale", base + "_zp"],
                                          [dq_name(name)]))
    drop = set()
    for n in g.node:
        ins = list(n.input)
        for k, i in enumerate(ins):
            if i in qparams and (n.op_type in ("Conv", "MatMul", "Add")):
                ins[k] = dq_name(i)
        if n.op_type in ("Conv", "MatMul") and len(ins) > 1 and ins[1] in inits and ins[0].endswith("_dq"):
            w = numpy_helper.to_array(inits[ins[1]]).astype(np.float32)
            if n.op_type == "Conv":
                amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
                ws = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
                wq = np.clip(np.round(w / ws.reshape(-1, *([1] * (w.ndim - 1)))), -127, 127).astype(np.int8)
                wz = np.zeros(w.shape[0], np.int8)
                axis = 0
            else:
                amax = float(np.abs(w).max())
                ws = np.array(amax / 127.0 if amax > 0 else 1.0, np.float32)
                wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
                wz = np.array(0, np.int8)
                axis = None
            wn = ins[1]
            new_inits += [numpy_helper.from_array(wq, wn + "_q"), numpy_helper.from_array(ws, wn + "_wscale"),
                          numpy_helper.from_array(wz, wn + "_wzp")]
            kw = {"axis": axis} if axis is not None else {}
            nodes.append(helper.make_node("DequantizeLinear", [wn + "_q", wn + "_wscale", wn + "_wzp"], [wn + "_dqw"],
                                          **kw))
            drop.add(wn)
            ins[1] = wn + "_dqw"
            if n.op_type == "Conv" and len(ins) > 2 and ins[2] in inits:
                b = numpy_helper.to_array(inits[ins[2]]).astype(np.float64)
                xs = float(qparams[n.input[0]][0])
                bs = (xs * ws.astype(np.float64)).astype(np.float32)
                bq = np.round(b / bs.astype(np.float64)).astype(np.int32)
                bn = ins[2]
                new_inits += [numpy_helper.from_array(bq, bn + "_q"), numpy_helper.from_array(bs, bn + "_bscale"),
                              numpy_helper.from_array(np.zeros(bq.shape, np.int32), bn + "_bzp")]
                nodes.append(helper.make_node("DequantizeLinear", [bn + "_q", bn + "_bscale", bn + "_bzp"],
                                              [bn + "_dqb"], axis=0))
                drop.add(bn)
                ins[2] = bn + "_dqb"
        nn = helper.make_node(n.op_type, ins, list(n.output), name=n.name, domain=n.domain)
        nn.attribute.extend(n.attribute)
        nodes.append(nn)
        for o in n.output:
            if o in qparams:
                base = o.replace("/", "_").strip("_")
                nodes.append(helper.make_node("QuantizeLinear", [o, base + "_scale", base + "_zp"], [o + "_q"]))
                nodes.append(helper.make_node("DequantizeLinear", [o + "_q", base + "_scale", base + "_zp"],
                                              [dq_name(o)]))
    keep = [t for t in g.initializer if t.name not in drop]
    graph = helper.make_graph(nodes, g.name, list(g.input), list(g.output), keep + new_inits)
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(13, model.opset_import[0].version))])
    out.ir_version = model.ir_version
    onnx.checker.check_model(out)
    onnx.save(out, a.out)
    print("quantize_qdq: %d activations, %d weights quantized -> %s" % (len(names), len(drop), a.out))


if __name__ == "__main__":
    main()
