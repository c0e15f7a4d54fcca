#!/usr/bin/env python3
"""Seed corpus for tests/fuzz/fuzz_gguf.c: small GGUF images written field by
field (every metadata type, arrays, tensors of several types, a custom
alignment, version 2 and 3), plus a few broken ones.

    tools/make_gguf_fuzz_corpus.py tests/fuzz/corpus/gguf
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}
# ggml type -> (block elements, block bytes)
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, value, elem=None):
    out = s(key) + struct.pack("<I", typ)
    if typ == STR:
        return out + s(value)
    if typ == ARR:
        out += struct.pack("<IQ", elem, len(value))
        return out + b"".join(s(v) if elem == STR else struct.pack(SCALAR[elem], v) for v in value)
    return out + struct.pack(SCALAR[typ], value)


def gguf(version, kvs, tensors, alignment=32):
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    infos, blobs, offset = b"", b"", 0
    for name, ne, typ in tensors:
        be, bb = BLOCK[typ]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // be * bb
        offset = (offset + alignment - 1) // alignment * alignment
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", typ, offset)
        blobs = blobs.ljust(offset, b"\0") + bytes((i * 7) & 255 for i in range(nbytes))
        offset += nbytes
    body = head + infos
    body = body.ljust((len(body) + alignment - 1) // alignment * alignment, b"\0")
    return body + blobs


def main(out):
    os.makedirs(out, exist_ok=True)
    every = [kv("general.architecture", STR, "llama"), kv("a.u8", U8, 7), kv("a.i8", I8, -7), kv("a.u16", U16, 700),
             kv("a.i16", I16, -700), kv("a.u32", U32, 70000), kv("a.i32", I32, -70000), kv("a.f32", F32, 1.5),
             kv("a.bool", BOOL, True), kv("a.u64", U64, 1 << 40), kv("a.i64", I64, -(1 << 40)), kv("a.f64", F64, 2.5)]
    vocab = [kv("tokenizer.ggml.model", STR, "gpt2"),
             kv("tokenizer.ggml.tokens", ARR, ["a", "b", "ab", "<s>", ""], STR),
             kv("tokenizer.ggml.token_type", ARR, [1, 1, 1, 3, 1], I32),
             kv("tokenizer.ggml.scores", ARR, [0.0, -1.0, -2.0, 0.0, -3.0], F32),
             kv("tokenizer.ggml.merges", ARR, ["a b"], STR)]
    seeds = {
        "every_type_v3": gguf(3, every, []),
        "every_type_v2": gguf(2, every, []),
        "vocab": gguf(3, vocab, []),
        "tensors": gguf(3, [kv("general.architecture", STR, "llama")],
                        [("tok_embd.weight", [32, 4], 1), ("blk.0.attn_q.weight", [64, 2], 8),
                         ("blk.0.ffn_up.weight", [32, 3], 2), ("output_norm.weight", [32], 0),
                         ("blk.0.ffn_down.weight", [256, 1], 12), ("blk.0.attn_v.weight", [256, 1], 14),
                         ("x.bf16", [3, 2, 2], 30)]),
        "aligned64": gguf(3, [kv("general.alignment", U32, 64)], [("t", [5], 0), ("u", [7], 0)], alignment=64),
        "truncated": gguf(3, vocab, [("t", [8], 0)])[:-9],
        "bad_offset": gguf(3, [], [("t", [8], 0)]).replace(struct.pack("<IQ", 0, 0), struct.pack("<IQ", 0, 4096), 1),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/gguf")
