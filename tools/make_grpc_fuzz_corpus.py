#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_codec_grpc.c: serialized
ModelInferRequest messages (from proto/grpc_service.proto, through Debian's
protoc and python3-protobuf), each behind the target's one selector byte.

  tools/make_grpc_fuzz_corpus.py tests/fuzz/corpus/codec_grpc
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def main(argv):
    if len(argv) != 2:
        print("usage: make_grpc_fuzz_corpus.py OUTDIR", file=sys.stderr)
        return 2
    out = argv[1]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto")
    with tempfile.TemporaryDirectory() as gen:
        subprocess.run(["protoc", f"-I{src}", f"--python_out={gen}", "grpc_service.proto"], check=True)
        sys.path.insert(0, gen)
        import grpc_service_pb2 as pb

        def req(model="m", rid=""):
            return pb.ModelInferRequest(model_name=model, id=rid)

        seeds = {}
        r = req(rid="typed")
        t = r.inputs.add(name="x", datatype="FP32", shape=[2, 3])
        t.contents.fp32_contents.extend([1.5, -2, 0, 3.25, 1e30, -0.0])
        r.outputs.add(name="x")
        r.parameters["priority"].int64_param = 1
        r.parameters["timeout"].int64_param = 1000
        seeds["typed_fp32"] = r
        r = req()
        r.inputs.add(name="x", datatype="FP32", shape=[1, 4])
        r.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
        seeds["raw_fp32"] = r
        r = req()
        t = r.inputs.add(name="s", datatype="BYTES", shape=[2])
        t.contents.bytes_contents.extend([b"ab", b"\xff"])
        seeds["typed_bytes"] = r
        r = req()
        r.inputs.add(name="s", datatype="BYTES", shape=[2])
        r.raw_input_contents.append(b"\x02\x00\x00\x00ab\x00\x00\x00\x00")
        seeds["raw_bytes"] = r
        r = req()
        t = r.inputs.add(name="b", datatype="BOOL", shape=[3])
        t.contents.bool_contents.extend([True, False, True])
        t = r.inputs.add(name="i", datatype="INT8", shape=[2])
        t.contents.int_contents.extend([-128, 127])
        t = r.inputs.add(name="u", datatype="UINT64", shape=[1])
        t.contents.uint64_contents.append(2 ** 64 - 1)
        seeds["typed_mixed"] = r
        r = req()
        r.inputs.add(name="h", datatype="FP16", shape=[2])
        r.raw_input_contents.append(np.array([1, 2], dtype=np.float16).tobytes())
        seeds["raw_fp16"] = r
        r = req(model="")
        seeds["no_model"] = r
        os.makedirs(out, exist_ok=True)
        for name, msg in seeds.items():
            body = msg.SerializeToString()
            for sel in (0, 1):
                with open(os.path.join(out, f"{name}_{sel}.bin"), "wb") as f:
                    f.write(bytes([sel]) + body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
