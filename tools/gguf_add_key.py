#!/usr/bin/python3
"""Copies a GGUF file, adding one string metadata key.

    /usr/bin/python3 tools/gguf_add_key.py IN.gguf OUT.gguf KEY VALUE

For tests that need a model file carrying a given key (the e2e test of
policy fields in model metadata: tests/e2e/test_tenants.py). Pure Python
(struct), no gguf-py: the header's key/value pairs are walked to find the
tensor infos, the new pair is appended after the others, and the tensor
data is copied whole after the alignment padding (tensor offsets are
relative to the data section, so they stay as they are).
"""
import struct
import sys

# Sizes of the fixed-size value types, by GGUF type id; 8 = string, 9 = array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4


def skip_value(buf, pos, vtype):
    if vtype in FIXED:
        return pos + FIXED[vtype]
    if vtype == STRING:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == ARRAY:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        for _ in range(count):
            pos = skip_value(buf, pos, etype)
        return pos
    raise ValueError(f"unknown GGUF value type {vtype} at byte {pos}")


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def main(argv):
    if len(argv) != 5:
        print("usage: gguf_add_key.py IN.gguf OUT.gguf KEY VALUE", file=sys.stderr)
        return 2
    buf = open(argv[1], "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF" or version < 2:
        print(f"gguf_add_key.py: {argv[1]}: not a GGUF v2+ file", file=sys.stderr)
        return 1
    pos, alignment = 24, 32
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if key == "general.alignment" and vtype == UINT32:
            (alignment,) = struct.unpack_from("<I", buf, pos)
        pos = skip_value(buf, pos, vtype)
    kv_end = pos
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + nlen
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * n_dims + 4 + 8
    infos_end = pos
    data_start = (infos_end + alignment - 1) // alignment * alignment
    out = bytearray(struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 1))
    out += buf[24:kv_end]
    out += gguf_string(argv[3]) + struct.pack("<I", STRING) + gguf_string(argv[4])
    out += buf[kv_end:infos_end]
    out += b"\0" * ((-len(out)) % alignment)
    out += buf[data_start:]
    open(argv[2], "wb").write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
