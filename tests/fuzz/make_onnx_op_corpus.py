#!/usr/bin/python3
"""Seeds of the ONNX importer's fuzz corpus for the operators newer than
Debian's ONNX test suite: every case tools/make_op_cases.py writes whose
model is small, with its inputs turned into initializers, so that loading
it folds the node and runs its reference kernel (the fuzzer then mutates
kernel inputs and attributes); as written when its inputs cannot be.

    /usr/bin/python3 tests/fuzz/make_onnx_op_corpus.py
"""
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "onnx_import")
LIMIT = 4096  # bytes of a seed


def main():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "make_op_cases.py"), tmp], check=True,
                       stdout=subprocess.DEVNULL)
        node_dir = os.path.join(tmp, "node")
        written = 0
        for case in sorted(os.listdir(node_dir)):
            path = os.path.join(node_dir, case, "model.onnx")
            data = open(path, "rb").read()
            model = onnx.load_from_string(data)
            inputs = []
            for i, info in enumerate(model.graph.input):
                pb = os.path.join(node_dir, case, "test_data_set_0", f"input_{i}.pb")
                if not os.path.exists(pb):
                    break
                t = TensorProto()
                t.ParseFromString(open(pb, "rb").read())
                t.name = info.name
                inputs.append(t)
            if len(inputs) == len(model.graph.input):  # not sequence or optional inputs
                del model.graph.input[:]
                model.graph.initializer.extend(inputs)
                data = model.SerializeToString()
            if len(data) <= LIMIT:
                with open(os.path.join(OUT, f"op_{case}.onnx"), "wb") as f:
                    f.write(data)
                written += 1
        print(f"{written} seeds in {OUT}")


if __name__ == "__main__":
    main()
