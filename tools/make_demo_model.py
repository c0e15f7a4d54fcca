#!/usr/bin/python3
"""Trains the demo classifier and exports it to ONNX.

Data: scikit-learn's bundled handwritten digits (8x8 images, pixel values
0..16, 1797 samples; Debian package python3-sklearn). Model: an MLP
64-64-10 (scikit-learn MLPClassifier, fixed seed), exported with onnx.helper
as Mul(1/16) -> MatMul -> Add -> Relu -> MatMul -> Add -> Softmax, plus an
ArgMax label output. The batch axis is dynamic.

Writes models/demo/digits.onnx, a few sample inputs (sample_K.npy, raw
pixels as float32 [1, 64]) and models/demo/samples.txt with their labels.
Training is not part of the build: run this by hand to regenerate.

    /usr/bin/python3 tools/make_demo_model.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "demo")


def main():
    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0)
    clf = MLPClassifier(hidden_layer_sizes=(64,), max_iter=600, random_state=0)
    clf.fit(x_train / 16.0, y_train)
    acc = clf.score(x_test / 16.0, y_test)
    print(f"test accuracy: {acc:.4f}")

    w1, w2 = (w.astype(np.float32) for w in clf.coefs_)
    b1, b2 = (b.astype(np.float32) for b in clf.intercepts_)
    inits = [
        numpy_helper.from_array(np.array([1.0 / 16.0], dtype=np.float32), "scale"),
        numpy_helper.from_array(w1, "fc1.weight"),
        numpy_helper.from_array(b1, "fc1.bias"),
        numpy_helper.from_array(w2, "fc2.weight"),
        numpy_helper.from_array(b2, "fc2.bias"),
    ]
    nodes = [
        helper.make_node("Mul", ["input", "scale"], ["scaled"], name="scale_pixels"),
        helper.make_node("MatMul", ["scaled", "fc1.weight"], ["fc1.mm"], name="fc1"),
        helper.make_node("Add", ["fc1.mm", "fc1.bias"], ["fc1.out"], name="fc1_bias"),
        helper.make_node("Relu", ["fc1.out"], ["fc1.act"], name="relu1"),
        helper.make_node("MatMul", ["fc1.act", "fc2.weight"], ["fc2.mm"], name="fc2"),
        helper.make_node("Add", ["fc2.mm", "fc2.bias"], ["logits"], name="fc2_bias"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=-1),
        helper.make_node("ArgMax", ["probabilities"], ["label"], name="argmax", axis=-1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 64])],
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10]),
            helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="mcp2026-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(OUT, exist_ok=True)
    onnx.save(model, os.path.join(OUT, "digits.onnx"))

    lines = ["# sample file, true digit, scikit-learn prediction"]
    for k in range(5):
        sample = x_test[k : k + 1]
        np.save(os.path.join(OUT, f"sample_{k}.npy"), sample)
        if k == 0:
            # The quickstart request body for POST /v1/infer (make run prints it as curl).
            pixels = ",".join(str(int(v)) for v in sample.ravel())
            with open(os.path.join(OUT, "sample_0.json"), "w") as f:
                f.write('{"input": [%s], "shape": [1, 64]}\n' % pixels)
        pred = int(clf.predict(sample / 16.0)[0])
        lines.append(f"sample_{k}.npy {int(y_test[k])} {pred}")
    with open(os.path.join(OUT, "samples.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
