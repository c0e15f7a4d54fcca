#!/usr/bin/python3
"""Seeds of the ONNX importer's fuzz corpus for ONNX's narrow element types
(FLOAT8E4M3FN = 17 through INT2 = 26), and for numbers ONNX does not define.

For each narrow type: dtype_N_NAME.onnx, an Add whose input, output and
initializer declare the type, which the engine refuses (Add does not
compute on it), and dtype_N_NAME_loads.onnx, which loads: an initializer of
the type (raw_data, packed for the 4-bit and 2-bit types) cast to float,
and a float input cast to the type and back. dtype_27_undefined.onnx and
dtype_99_undefined.onnx declare numbers ONNX does not define and must be
refused. Debian's python3-onnx predates these types (its enums are
closed), so the Add model is written with FLOAT and the one-byte type
fields are patched afterwards; the other fields are plain integers.

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


def loads(number, opset=25):
    """A model that loads: initializer w (3 elements of the type) and input
    x cast through the type."""
    w = TensorProto()
    w.name = "w"
    w.data_type = number
    w.dims.extend([3])
    bits = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}.get(number, 8)
    w.raw_data = bytes([0x21, 0x03]) if bits == 4 else bytes([0x24]) if bits == 2 else bytes([0x38, 0x40, 0x01])
    nodes = [helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["x"], ["xn"], to=number),
             helper.make_node("Cast", ["xn"], ["y"], to=TensorProto.FLOAT)]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "dtypes", [info("x", TensorProto.FLOAT, [3])],
                              [info("wf", TensorProto.FLOAT, [3]), info("y", TensorProto.FLOAT, [3]),
                               info("xn", number, [3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 11
    return model.SerializeToString()


for number, name in enumerate(NAMES, start=17):
    with open(os.path.join(OUT, f"dtype_{number}_{name.lower()}_loads.onnx"), "wb") as f:
        f.write(loads(number))
for number in (27, 99):
    with open(os.path.join(OUT, f"dtype_{number}_undefined.onnx"), "wb") as f:
        f.write(loads(number))
