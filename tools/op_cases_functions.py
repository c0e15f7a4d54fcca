"""Cases for model-local functions (ModelProto.functions, IR 8+), as
exporters that keep submodules as functions write them: the engine inlines
each call. Run by tools/make_op_cases.py; expected outputs from numpy.

Debian's python3-onnx (1.12) predates FunctionProto.attribute_proto (field
11, attribute defaults): the default is appended to the serialized function
as that field and parsed back, so it travels as a field this onnx does not
know, as it would from a newer exporter.
"""
from math import erf

import numpy as np
from onnx import AttributeProto, FunctionProto, helper

F32 = np.float32


def function(name, inputs, outputs, nodes, attributes=(), opset=18, domain="custom", defaults=()):
    f = helper.make_function(domain, name, inputs, outputs, nodes,
                             [helper.make_opsetid("", opset), helper.make_opsetid("custom", 1)], list(attributes))
    if not defaults:
        return f
    data = f.SerializeToString()
    for a in defaults:
        body = a.SerializeToString()
        n, varint = len(body), b""
        while True:
            varint += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                break
        data += bytes([(11 << 3) | 2]) + varint + body
    parsed = FunctionProto()
    parsed.ParseFromString(data)
    return parsed


def ref_attr(name, ref, kind):
    a = AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, kind
    return a


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def cases(out, rng, lib):
    node = helper.make_node
    opsets = {"custom": 1}

    # A function called twice: its internal values must not collide.
    gelu_fn = function("Gelu", ["x"], ["y"], [
        node("Constant", [], ["r2"], value_float=float(np.sqrt(2))),
        node("Div", ["x", "r2"], ["d"]), node("Erf", ["d"], ["e"]),
        node("Constant", [], ["one"], value_float=1.0), node("Add", ["e", "one"], ["a"]),
        node("Mul", ["x", "a"], ["m"]), node("Constant", [], ["half"], value_float=0.5),
        node("Mul", ["m", "half"], ["y"])])
    x = rng.standard_normal((3, 5)).astype(F32)
    y = gelu(gelu(x.astype(np.float64)))
    lib.write_case(out, "test_functions_called_twice", 18,
                   [node("Gelu", ["x"], ["h"], domain="custom"), node("Gelu", ["h"], ["y"], domain="custom")],
                   [("x", x)], [("y", y.astype(F32))], opsets=opsets, functions=[gelu_fn])

    # A function holding a constant of 2048 floats (stored as raw bytes, the
    # kind an import may take over), called twice.
    bias = rng.standard_normal(2048).astype(F32)
    add_fn = function("AddTable", ["x"], ["y"], [
        node("Constant", [], ["t"], value=helper.make_tensor("t", 1, [2048], bias.tobytes(), raw=True)),
        node("Add", ["x", "t"], ["y"])])
    x = rng.standard_normal((2, 2048)).astype(F32)
    lib.write_case(out, "test_functions_constant_twice", 18,
                   [node("AddTable", ["x"], ["h"], domain="custom"), node("AddTable", ["h"], ["y"], domain="custom")],
                   [("x", x)], [("y", (x.astype(np.float64) + 2 * bias.astype(np.float64)).astype(F32))],
                   opsets=opsets, functions=[add_fn])

    # An attribute the call gives (axis 0), one it leaves to the function's
    # default (axis 1 in attribute_proto), and one with neither (Softmax's own -1).
    soft = function("ScaledSoftmax", ["x", "s"], ["y"], [
        node("Mul", ["x", "s"], ["m"]),
        helper.make_node("Softmax", ["m"], ["y"])], attributes=["axis"],
        defaults=[helper.make_attribute("axis", 1)])
    soft.node[1].attribute.append(ref_attr("axis", "axis", AttributeProto.INT))
    bare = function("BareSoftmax", ["x"], ["y"], [node("Softmax", ["x"], ["y"])], attributes=["axis"])
    bare.node[0].attribute.append(ref_attr("axis", "axis", AttributeProto.INT))
    x = rng.standard_normal((2, 3, 4)).astype(F32)
    s = np.array(1.5, dtype=F32)
    x64 = x.astype(np.float64) * 1.5
    lib.write_case(out, "test_functions_attribute_refs", 18,
                   [node("ScaledSoftmax", ["x", "s"], ["y0"], domain="custom", axis=0),
                    node("ScaledSoftmax", ["x", "s"], ["y1"], domain="custom"),
                    node("BareSoftmax", ["x"], ["y2"], domain="custom")],
                   [("x", x), ("s", s)],
                   [("y0", softmax(x64, 0).astype(F32)), ("y1", softmax(x64, 1).astype(F32)),
                    ("y2", softmax(x.astype(np.float64), -1).astype(F32))], opsets=opsets, functions=[soft, bare])

    # Functions calling functions, an optional input left out, and a second
    # output the call does not name.
    inner = function("AddBias", ["x", "b"], ["y", "unused"], [
        node("Add", ["x", "b"], ["y"]), node("Neg", ["x"], ["unused"])])
    outer = function("Block", ["x", "w", "b"], ["y"], [
        node("MatMul", ["x", "w"], ["h"]), node("AddBias", ["h", "b"], ["y"], domain="custom")])
    clip = function("MaybeClip", ["x", "lo"], ["y"], [node("Clip", ["x", "lo"], ["y"])])
    x = rng.standard_normal((4, 6)).astype(F32)
    w = rng.standard_normal((6, 3)).astype(F32)
    b = rng.standard_normal(3).astype(F32)
    h = x.astype(np.float64) @ w.astype(np.float64) + b
    lib.write_case(out, "test_functions_nested_optional", 18,
                   [node("Block", ["x", "w", "b"], ["h"], domain="custom"),
                    node("MaybeClip", ["h"], ["y"], domain="custom")],
                   [("x", x), ("w", w), ("b", b)], [("y", h.astype(F32))], opsets=opsets,
                   functions=[inner, outer, clip])
