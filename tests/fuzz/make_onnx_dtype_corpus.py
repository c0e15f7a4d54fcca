#!/usr/bin/python3
"""Seeds of the ONNX importer's fuzz corpus for element types the engine
does not implement (ONNX's FLOAT8E4M3FN = 17 through INT2 = 26): a model
whose input, output and initializer each declare one such type. Debian's
python3-onnx predates these types (its enums are closed), so the model is
written with FLOAT and the one-byte type fields are patched afterwards.

    /usr/bin/python3 tests/fuzz/make_onnx_dtype_corpus.py
"""
import os

from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx_import")
NAMES = ["FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1",
         "FLOAT8E8M0", "UINT2", "INT2"]

for number, name in enumerate(NAMES, start=17):
    init = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "dtypes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    data = bytearray(model.SerializeToString())
    # TypeProto.Tensor.elem_type (field 1, varint 1) before its shape
    # (field 2): "08 01 12"; the initializer's dims [2] then data_type:
    # "08 02 10 01" before its float_data (field 4, "22").
    data = data.replace(b"\x08\x01\x12", bytes([0x08, number, 0x12]))
    data = data.replace(b"\x08\x02\x10\x01\x22", bytes([0x08, 0x02, 0x10, number, 0x22]))
    with open(os.path.join(OUT, f"dtype_{number}_{name.lower()}.onnx"), "wb") as f:
        f.write(bytes(data))
