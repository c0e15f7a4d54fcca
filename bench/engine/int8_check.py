#!/usr/bin/env python3
"""Output agreement of an int8 (QDQ) model between this engine and ONNX
Runtime on the same file, and against the fp32 model it was made from.

    bench/engine/int8_check.py FP32.onnx INT8.onnx --mcpctl build/bin/mcpctl \
        --node-dir build/bench-engine [--count 200] [--batch 50]

Runs COUNT random normal inputs (batches of BATCH) through both engines and
prints: argmax agreement ours vs ORT on the int8 model (over all inputs, and
over those whose top-1 margin is clear of the engines' largest difference),
the largest and mean absolute output difference between them against the
output's spread, and each engine's int8 argmax agreement with our fp32
model.
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import onnx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fp32")
    ap.add_argument("int8")
    ap.add_argument("--mcpctl", required=True)
    ap.add_argument("--node-dir", required=True, help="folder with node_modules/onnxruntime-node")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    m = onnx.load(a.int8, load_external_data=False)
    inp = m.graph.input[0]
    dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(a.seed)
    ours, ort, ref = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        done = 0
        while done < a.count:
            n = min(a.batch, a.count - done)
            x = rng.standard_normal([n] + dims[1:]).astype(np.float32)
            xf = os.path.join(tmp, "x.npy")
            np.save(xf, x)
            outs = []
            for model in (a.int8, a.fp32):
                od = os.path.join(tmp, "out")
                subprocess.run([a.mcpctl, "run", model, od, "%s=%s" % (inp.name, xf)], check=True,
                               stdout=subprocess.DEVNULL)
                outs.append(np.load(os.path.join(od, sorted(os.listdir(od))[0])))
            ours.append(outs[0])
            ref.append(outs[1])
            of = os.path.join(tmp, "ort.npy")
            env = dict(os.environ, NODE_PATH=os.path.join(os.path.abspath(a.node_dir), "node_modules"))
            subprocess.run(["node", os.path.join(here, "ort_run.js"), a.int8, xf, of, "2"], check=True, env=env)
            ort.append(np.load(of))
            done += n
    ours, ort, ref = (np.concatenate(v).reshape(a.count, -1) for v in (ours, ort, ref))
    spread = float(ort.std())
    diff = np.abs(ours - ort)
    print("int8 check: %s, %d inputs" % (os.path.basename(a.int8), a.count))
    print("  argmax ours vs ORT (same int8 file): %.1f%%" % (100.0 * np.mean(ours.argmax(1) == ort.argmax(1))))
    print("  |ours - ORT|: max %.4f, mean %.4f (output std %.4f)" % (diff.max(), diff.mean(), spread))
    # Random-weight models have nearly flat logits, where any rounding
    # flips the argmax; count also the inputs whose top-1 margin (on ORT's
    # int8 output) exceeds twice the largest difference between the engines.
    top2 = np.sort(ort, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * float(diff.max())
    if clear.any():
        print("  argmax ours vs ORT where ORT's top-1 margin > 2 x max |ours - ORT|: %.1f%% of %d inputs" % (
            100.0 * np.mean(ours.argmax(1)[clear] == ort.argmax(1)[clear]), int(clear.sum())))
    print("  argmax int8 vs our fp32: ours %.1f%%, ORT %.1f%%" % (
        100.0 * np.mean(ours.argmax(1) == ref.argmax(1)), 100.0 * np.mean(ort.argmax(1) == ref.argmax(1))))


if __name__ == "__main__":
    main()
