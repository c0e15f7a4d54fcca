#!/usr/bin/env python3
"""Reference forward pass of the decoders the LLM runtime supports (llama /
mistral, qwen2, gpt2), written from the architectures' definitions in
python3-torch, in float64, on the GGUF file's weights dequantized by gguf-py.
It shares no code with the C runtime: the tests compare the two.

    tools/llm_reference.py MODEL.gguf OUT_DIR --tokens 1,2,3 [--greedy N]

Writes OUT_DIR/ref_logits.f32 (every prompt position's logits, float32 rows)
and OUT_DIR/ref_greedy.txt (N greedy tokens after the prompt, each from a
full recomputation of the whole sequence: no cache).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_CPP = os.environ.get("MCP_LLAMA_CPP_DIR", os.path.join(ROOT, ".cache", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))
import gguf  # noqa: E402


class Model:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.meta = {}
        for f in r.fields.values():
            if f.types and f.types[0] == gguf.GGUFValueType.STRING:
                self.meta[f.name] = bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
            elif f.types and f.types[0] != gguf.GGUFValueType.ARRAY:
                self.meta[f.name] = f.parts[f.data[0]].tolist()[0]
        self.arch = self.meta["general.architecture"]
        self.t = {}
        for t in r.tensors:
            # gguf-py gives the data with numpy's shape (outermost first).
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            shape = [int(x) for x in reversed(t.shape)]
            self.t[t.name] = torch.tensor(np.asarray(a, dtype=np.float64).reshape(shape), dtype=torch.float64)
        a = self.arch
        self.n_embd = self.meta[f"{a}.embedding_length"]
        self.n_layer = self.meta[f"{a}.block_count"]
        self.n_head = self.meta[f"{a}.attention.head_count"]
        self.n_head_kv = self.meta.get(f"{a}.attention.head_count_kv", self.n_head)
        self.hd = self.n_embd // self.n_head
        self.eps = self.meta.get(f"{a}.attention.layer_norm_epsilon" if a == "gpt2"
                                 else f"{a}.attention.layer_norm_rms_epsilon", 1e-5)
        self.n_rot = self.meta.get(f"{a}.rope.dimension_count", self.hd)
        self.base = self.meta.get(f"{a}.rope.freq_base", 10000.0)
        scale = 1.0
        if self.meta.get(f"{a}.rope.scaling.type") == "linear":
            scale = 1.0 / self.meta[f"{a}.rope.scaling.factor"]
        i = torch.arange(self.n_rot // 2, dtype=torch.float64)
        self.inv_freq = scale * self.base ** (-2.0 * i / self.n_rot)
        if "rope_freqs.weight" in self.t:
            self.inv_freq = self.inv_freq / self.t["rope_freqs.weight"]

    def w(self, name):
        return self.t[name]

    def rms(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def ln(self, x, w, b):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * w + b

    def rope(self, x, pos):
        """x: [T, heads, hd]; llama rotates adjacent pairs, qwen2 halves."""
        ang = pos[:, None].double() * self.inv_freq[None, :]  # [T, n_rot/2]
        c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        x = x.clone()
        r = x[..., : self.n_rot]
        if self.arch == "qwen2":
            a, b = r[..., : self.n_rot // 2], r[..., self.n_rot // 2:]
            x[..., : self.n_rot] = torch.cat([a * c - b * s, a * s + b * c], -1)
        else:
            a, b = r[..., 0::2], r[..., 1::2]
            out = torch.empty_like(r)
            out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
            x[..., : self.n_rot] = out
        return x

    def forward(self, tokens, last_only=False):
        """Logits of every position of `tokens` (a causal pass over the whole
        sequence), or of the last position only."""
        T = len(tokens)
        ids = torch.tensor(tokens)
        pos = torch.arange(T)
        x = self.w("token_embd.weight")[ids]
        gpt2 = self.arch == "gpt2"
        if gpt2:
            x = x + self.w("position_embd.weight")[pos]
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        for i in range(self.n_layer):
            p = f"blk.{i}."
            h = self.ln(x, self.w(p + "attn_norm.weight"), self.w(p + "attn_norm.bias")) if gpt2 else \
                self.rms(x, self.w(p + "attn_norm.weight"))
            if gpt2:
                qkv = h @ self.w(p + "attn_qkv.weight").T + self.w(p + "attn_qkv.bias")
                q, k, v = qkv.split([self.n_embd, self.n_head_kv * self.hd, self.n_head_kv * self.hd], -1)
            else:
                q = h @ self.w(p + "attn_q.weight").T
                k = h @ self.w(p + "attn_k.weight").T
                v = h @ self.w(p + "attn_v.weight").T
                if p + "attn_q.bias" in self.t:
                    q, k, v = q + self.w(p + "attn_q.bias"), k + self.w(p + "attn_k.bias"), v + self.w(p + "attn_v.bias")
            q = q.view(T, self.n_head, self.hd)
            k = k.view(T, self.n_head_kv, self.hd)
            v = v.view(T, self.n_head_kv, self.hd)
            if not gpt2:
                q, k = self.rope(q, pos), self.rope(k, pos)
            group = self.n_head // self.n_head_kv
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(self.hd) + mask
            att = torch.softmax(att, -1)
            o = torch.einsum("hts,shd->thd", att, v).reshape(T, self.n_head * self.hd)
            o = o @ self.w(p + "attn_output.weight").T
            if gpt2:
                o = o + self.w(p + "attn_output.bias")
            x = x + o
            h = self.ln(x, self.w(p + "ffn_norm.weight"), self.w(p + "ffn_norm.bias")) if gpt2 else \
                self.rms(x, self.w(p + "ffn_norm.weight"))
            if gpt2:
                u = h @ self.w(p + "ffn_up.weight").T + self.w(p + "ffn_up.bias")
                a = 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)))
                d = a @ self.w(p + "ffn_down.weight").T + self.w(p + "ffn_down.bias")
            else:
                g = h @ self.w(p + "ffn_gate.weight").T
                u = h @ self.w(p + "ffn_up.weight").T
                d = (torch.nn.functional.silu(g) * u) @ self.w(p + "ffn_down.weight").T
            x = x + d
        x = self.ln(x, self.w("output_norm.weight"), self.w("output_norm.bias")) if gpt2 else \
            self.rms(x, self.w("output_norm.weight"))
        out = self.t.get("output.weight", self.t["token_embd.weight"])
        return (x[-1:] if last_only else x) @ out.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--greedy", type=int, default=0)
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    m = Model(a.model)
    with torch.no_grad():
        logits = m.forward(tokens)
        logits.to(torch.float32).numpy().tofile(os.path.join(a.out, "ref_logits.f32"))
        seq = list(tokens)
        nxt = []
        for _ in range(a.greedy):
            t = int(torch.argmax(m.forward(seq, last_only=True)[-1]))
            nxt.append(t)
            seq.append(t)
    with open(os.path.join(a.out, "ref_greedy.txt"), "w") as f:
        f.write("".join(f"{t}\n" for t in nxt))


if __name__ == "__main__":
    main()
