#!/usr/bin/env python3
"""Random-weight decoder models in GGUF, for the LLM runtime's tests and
benchmarks: every supported architecture in every supported weight type.

    tools/make_llm_test_models.py OUT_DIR [--only NAME ...] [--bench]

Weights are random (normal, scaled like a fresh initialisation), written
with the gguf-py that ships in llama.cpp's source (tools/fetch-llama-cpp.sh
puts it in .cache/llama.cpp/gguf-py). The tokenizer of each file is a real
one copied from llama.cpp's vocab-only files, so text goes in and out:
llama and mistral use the SentencePiece vocab of Llama 2, qwen2 and gpt2 the
byte-level BPE vocab of GPT-2.

--bench writes the benchmark models instead: a ~100 M and a ~1 B parameter
Llama in F16, Q8_0 and Q4_0 (large files; written once, reused).
"""
import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_CPP = os.environ.get("MCP_LLAMA_CPP_DIR", os.path.join(ROOT, ".cache", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))
try:
    import gguf  # noqa: E402
except ImportError:
    sys.exit(f"make_llm_test_models: gguf-py not found under {LLAMA_CPP}; run tools/fetch-llama-cpp.sh")

T = gguf.GGMLQuantizationType
TYPES = {"F32": T.F32, "F16": T.F16, "BF16": T.BF16, "Q8_0": T.Q8_0, "Q4_0": T.Q4_0, "Q4_K_M": "Q4_K_M"}

# Small shapes: every product's inner size a multiple of 32 (the quantized
# blocks), grouped-query attention (4 heads sharing 2 KV heads), two layers.
SMALL = dict(n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_layer=2, n_ctx=256)


def copy_tokenizer(w, vocab_file):
    """Copies every tokenizer.* key of a vocab-only GGUF into writer w; returns the vocab size."""
    r = gguf.GGUFReader(vocab_file)
    n_vocab = None
    for field in r.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            etype = field.types[1]
            if etype == gguf.GGUFValueType.STRING:
                vals = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
                if field.name == "tokenizer.ggml.tokens":
                    n_vocab = len(vals)
            else:
                vals = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(field.name, vals, vtype, sub_type=etype)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_key_value(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype)
        else:
            w.add_key_value(field.name, field.parts[field.data[0]].tolist()[0], vtype)
    return n_vocab


def k_quant_blocks(arr, qtype, rng):
    """Random Q4_K or Q6_K blocks for a matrix shaped like arr, its values
    spread like arr's (gguf-py dequantizes but does not quantize K-quants;
    random weights need no quantizer, and the reference reads them back
    through gguf-py's own dequantization)."""
    rows, k = arr.shape
    n = rows * k // 256
    std = float(np.std(arr)) or 1.0
    if qtype == T.Q4_K:
        # d * scale * q - dmin * min, scale and min 6-bit, q 4-bit.
        b = rng.integers(0, 256, (n, 144), dtype=np.uint8)
        b[:, 0:2] = np.full(n, std / 120.0, np.float16).view(np.uint8).reshape(n, 2)
        b[:, 2:4] = np.full(n, std / 32.0, np.float16).view(np.uint8).reshape(n, 2)
    else:
        # d * scale * (q - 32), scale int8, q 6-bit.
        b = rng.integers(0, 256, (n, 210), dtype=np.uint8)
        b[:, 192:208] = rng.integers(-64, 65, (n, 16)).astype(np.int8).view(np.uint8)
        b[:, 208:210] = np.full(n, std / 1000.0, np.float16).view(np.uint8).reshape(n, 2)
    return b.reshape(rows, k // 256 * b.shape[1])


def add(w, name, arr, qtype, rng=None):
    """A tensor in `qtype` (norms and biases always F32). For the K-quant
    "type" Q4_K_M, Q4_K with the value, down and output matrices in Q6_K,
    as llama.cpp's Q4_K_M files have them."""
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qtype == "Q4_K_M" and arr.ndim == 2:
        q6 = any(s in name for s in ("attn_v.", "ffn_down.", "output.weight"))
        kt = T.Q6_K if q6 else T.Q4_K
        w.add_tensor(name, k_quant_blocks(arr, kt, rng), raw_dtype=kt)
        return
    if qtype == T.F32 or arr.ndim == 1:
        w.add_tensor(name, arr)
    elif qtype == T.F16:
        w.add_tensor(name, arr.astype(np.float16))
    else:
        data = gguf.quants.quantize(arr, qtype)
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)


def write_model(path, arch, qtype, vocab_file, seed, n_embd, n_head, n_head_kv, n_ff, n_layer, n_ctx, tied=False,
                rope_freqs=False, rope_linear=None, name=None):
    rng = np.random.default_rng(seed)
    hd = n_embd // n_head
    qd, kvd = n_head * hd, n_head_kv * hd
    w = gguf.GGUFWriter(path, arch)
    w.add_name(name or os.path.basename(path))
    n_vocab = copy_tokenizer(w, vocab_file)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    if arch == "gpt2":
        w.add_layer_norm_eps(1e-5)
    else:
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0 if arch != "qwen2" else 1000000.0)
        w.add_rope_dimension_count(hd)
        if rope_linear:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rope_linear)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == T.F32 else gguf.LlamaFileType.MOSTLY_F16
                    if qtype == T.F16 else gguf.LlamaFileType.MOSTLY_BF16 if qtype == T.BF16
                    else gguf.LlamaFileType.MOSTLY_Q8_0 if qtype == T.Q8_0
                    else gguf.LlamaFileType.MOSTLY_Q4_K_M if qtype == "Q4_K_M" else gguf.LlamaFileType.MOSTLY_Q4_0)

    def mat(rows, k, scale=None):
        return rng.standard_normal((rows, k)) * (scale if scale else 1.0 / np.sqrt(k))

    def vec(n, around=0.0, spread=0.1):
        return around + spread * rng.standard_normal(n)

    add(w, "token_embd.weight", mat(n_vocab, n_embd, 0.5), qtype, rng)
    if arch == "gpt2":
        add(w, "position_embd.weight", mat(n_ctx, n_embd, 0.1), qtype, rng)
    if rope_freqs:
        add(w, "rope_freqs.weight", 1.0 + 3.0 * rng.random(hd // 2), T.F32)
    for i in range(n_layer):
        p = f"blk.{i}."
        add(w, p + "attn_norm.weight", vec(n_embd, 1.0), T.F32)
        if arch == "gpt2":
            add(w, p + "attn_norm.bias", vec(n_embd), T.F32)
            add(w, p + "attn_qkv.weight", mat(qd + 2 * kvd, n_embd), qtype, rng)
            add(w, p + "attn_qkv.bias", vec(qd + 2 * kvd), T.F32)
        else:
            add(w, p + "attn_q.weight", mat(qd, n_embd), qtype, rng)
            add(w, p + "attn_k.weight", mat(kvd, n_embd), qtype, rng)
            add(w, p + "attn_v.weight", mat(kvd, n_embd), qtype, rng)
            if arch == "qwen2":
                add(w, p + "attn_q.bias", vec(qd), T.F32)
                add(w, p + "attn_k.bias", vec(kvd), T.F32)
                add(w, p + "attn_v.bias", vec(kvd), T.F32)
        add(w, p + "attn_output.weight", mat(n_embd, qd), qtype, rng)
        if arch == "gpt2":
            add(w, p + "attn_output.bias", vec(n_embd), T.F32)
        add(w, p + "ffn_norm.weight", vec(n_embd, 1.0), T.F32)
        if arch == "gpt2":
            add(w, p + "ffn_norm.bias", vec(n_embd), T.F32)
        else:
            add(w, p + "ffn_gate.weight", mat(n_ff, n_embd), qtype, rng)
        add(w, p + "ffn_up.weight", mat(n_ff, n_embd), qtype, rng)
        if arch == "gpt2":
            add(w, p + "ffn_up.bias", vec(n_ff), T.F32)
        add(w, p + "ffn_down.weight", mat(n_embd, n_ff), qtype, rng)
        if arch == "gpt2":
            add(w, p + "ffn_down.bias", vec(n_embd), T.F32)
    add(w, "output_norm.weight", vec(n_embd, 1.0), T.F32)
    if arch == "gpt2":
        add(w, "output_norm.bias", vec(n_embd), T.F32)
    if not tied:
        add(w, "output.weight", mat(n_vocab, n_embd), qtype, rng)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def small_models():
    """name -> (arch, type, vocab, extra options)"""
    spm = os.path.join(LLAMA_CPP, "models", "ggml-vocab-llama-spm.gguf")
    bpe = os.path.join(LLAMA_CPP, "models", "ggml-vocab-gpt-2.gguf")
    out = {}
    for tname in TYPES:
        if tname == "Q4_K_M":
            continue
        out[f"llama-{tname}"] = ("llama", tname, spm, {})
        out[f"qwen2-{tname}"] = ("qwen2", tname, bpe, {})
        out[f"gpt2-{tname}"] = ("gpt2", tname, bpe, dict(n_head_kv=4))
    # Variants: tied embeddings (SmolLM), Llama 3's per-dimension RoPE
    # factors, linear RoPE scaling, the mistral architecture name.
    out["llama-tied-F32"] = ("llama", "F32", spm, dict(tied=True))
    out["llama-ropefreqs-F32"] = ("llama", "F32", spm, dict(rope_freqs=True))
    out["llama-ropelinear-F32"] = ("llama", "F32", spm, dict(rope_linear=4.0))
    out["mistral-F32"] = ("mistral", "F32", spm, {})
    # K-quants need rows of 256: a wider model, and Qwen2 with its biases.
    wide = dict(n_embd=256, n_ff=512)
    out["llama-Q4_K_M"] = ("llama", "Q4_K_M", spm, wide)
    out["qwen2-Q4_K_M"] = ("qwen2", "Q4_K_M", bpe, wide)
    return out


def bench_models():
    spm = os.path.join(LLAMA_CPP, "models", "ggml-vocab-llama-spm.gguf")
    # ~100 M parameters (SmolLM-135M's shape) and ~1 B (TinyLlama-1.1B's).
    m100 = dict(n_embd=576, n_head=9, n_head_kv=3, n_ff=1536, n_layer=30, n_ctx=2048, tied=True)
    m1b = dict(n_embd=2048, n_head=32, n_head_kv=4, n_ff=5632, n_layer=22, n_ctx=2048)
    out = {}
    for tname in ("F16", "Q8_0", "Q4_0"):
        out[f"bench-100m-{tname}"] = ("llama", tname, spm, m100)
        out[f"bench-1b-{tname}"] = ("llama", tname, spm, m1b)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--bench", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    models = bench_models() if a.bench else small_models()
    for i, (name, (arch, tname, vocab, extra)) in enumerate(sorted(models.items())):
        if a.only and name not in a.only:
            continue
        path = os.path.join(a.out, name + ".gguf")
        if a.bench and os.path.exists(path):
            continue
        shape = dict(SMALL)
        shape.update(extra)
        write_model(path + ".tmp", arch, TYPES[tname], vocab, seed=1000 + i, name=name, **shape)
        os.replace(path + ".tmp", path)
        print(path)


if __name__ == "__main__":
    main()
