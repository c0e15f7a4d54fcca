#!/usr/bin/env python3
"""Trains the demo language model, models/demo/fortunes.gguf: a small Llama-
style decoder (RMSNorm, rotary positions, grouped-query attention, SwiGLU,
tied embeddings) with its own byte-level BPE vocabulary, on the quotations
of Debian's `fortunes` package, with python3-torch on the CPU.

    apt-get install fortunes python3-torch
    tools/fetch-llama-cpp.sh          # gguf-py, to write the file
    tools/train_demo_llm.py models/demo/fortunes.gguf [--minutes 20] [--seed 1]

Not part of the build: the result is committed. The tokenizer is GPT-2's
byte-level BPE scheme (tokenizer.ggml.model "gpt2", pre-tokenizer "gpt-2")
with merges learned here; the runtime reads it from the file like any other.
"""
import argparse
import collections
import glob
import math
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_CPP = os.environ.get("MCP_LLAMA_CPP_DIR", os.path.join(ROOT, ".cache", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))

FORTUNES = "/usr/share/games/fortunes"
EOT = "<|endoftext|>"
# GPT-2's pre-tokenizer, with Python's classes for letters and digits.
PRE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

# Small enough that the Q4_0 file stays under 1 MiB.
SHAPE = dict(n_embd=192, n_layer=4, n_head=6, n_head_kv=2, n_ff=384, n_ctx=256)


def byte_to_unicode():
    """GPT-2's printable stand-ins for the 256 byte values."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


B2U = byte_to_unicode()


def read_corpus():
    texts = []
    for path in sorted(glob.glob(os.path.join(FORTUNES, "*"))):
        base = os.path.basename(path)
        if "." in base or base in ("art", "ascii-art") or os.path.isdir(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for q in f.read().split("\n%\n"):
                q = q.strip("\n")
                if 20 <= len(q) <= 1200:
                    texts.append(q)
    if not texts:
        sys.exit(f"train_demo_llm: no fortunes under {FORTUNES} (apt-get install fortunes)")
    return texts


def words_of(text):
    return ["".join(B2U[b] for b in w.encode("utf-8")) for w in PRE.findall(text)]


def train_bpe(texts, n_merges):
    """Merges learned by pair frequency, updated incrementally."""
    freq = collections.Counter(w for t in texts for w in words_of(t))
    words = [list(w) for w in freq]
    counts = [freq[w] for w in freq]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += counts[i]
            where[a, b].add(i)
    merges = []
    for _ in range(n_merges):
        if not pairs:
            break
        (a, b), c = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if c < 2:
            break
        merges.append((a, b))
        ab = a + b
        for i in list(where[a, b]):
            w = words[i]
            for x, y in zip(w, w[1:]):
                pairs[x, y] -= counts[i]
                if pairs[x, y] <= 0:
                    del pairs[x, y]
            j, out = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(ab)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                pairs[x, y] += counts[i]
                where[x, y].add(i)
        del where[a, b]
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.tokens = [B2U[b] for b in range(256)] + [a + b for a, b in merges] + [EOT]
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.rank = {m: i for i, m in enumerate(merges)}
        self.eot = self.ids[EOT]
        self.cache = {}

    def word(self, w):
        if w in self.cache:
            return self.cache[w]
        parts = list(w)
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda i: self.rank.get((parts[i], parts[i + 1]), 1 << 30))
            if (parts[best], parts[best + 1]) not in self.rank:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        ids = [self.ids[p] for p in parts]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        return [i for w in words_of(text) for i in self.word(w)]


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


class Rope(nn.Module):
    def __init__(self, hd, base=10000.0):
        super().__init__()
        self.register_buffer("inv", base ** (-torch.arange(0, hd, 2).float() / hd), persistent=False)

    def forward(self, x):  # x: [B, T, H, hd]; rotates adjacent pairs
        t = torch.arange(x.shape[1], device=x.device).float()
        ang = t[:, None] * self.inv[None, :]
        c, s = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)


class Block(nn.Module):
    def __init__(self, e, h, hkv, ff):
        super().__init__()
        self.h, self.hkv, self.hd = h, hkv, e // h
        self.n1, self.n2 = RMSNorm(e, eps=1e-5), RMSNorm(e, eps=1e-5)
        self.q = nn.Linear(e, e, bias=False)
        self.k = nn.Linear(e, hkv * self.hd, bias=False)
        self.v = nn.Linear(e, hkv * self.hd, bias=False)
        self.o = nn.Linear(e, e, bias=False)
        self.gate = nn.Linear(e, ff, bias=False)
        self.up = nn.Linear(e, ff, bias=False)
        self.down = nn.Linear(ff, e, bias=False)
        self.rope = Rope(self.hd)

    def forward(self, x):
        B, T, E = x.shape
        h = self.n1(x)
        q = self.rope(self.q(h).view(B, T, self.h, self.hd))
        k = self.rope(self.k(h).view(B, T, self.hkv, self.hd))
        v = self.v(h).view(B, T, self.hkv, self.hd)
        g = self.h // self.hkv
        k, v = k.repeat_interleave(g, 2), v.repeat_interleave(g, 2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, E))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LM(nn.Module):
    def __init__(self, n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx):
        super().__init__()
        self.emb = nn.Embedding(n_vocab, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, n_head_kv, n_ff) for _ in range(n_layer))
        self.norm = RMSNorm(n_embd, eps=1e-5)
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        return self.norm(x) @ self.emb.weight.T


def write_gguf(path, model, tok, shape):
    import gguf
    T = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("mcp2026-fortunes-demo")
    w.add_description("A small decoder trained on Debian's fortunes package by tools/train_demo_llm.py")
    w.add_context_length(shape["n_ctx"])
    w.add_embedding_length(shape["n_embd"])
    w.add_block_count(shape["n_layer"])
    w.add_feed_forward_length(shape["n_ff"])
    w.add_head_count(shape["n_head"])
    w.add_head_count_kv(shape["n_head_kv"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(shape["n_embd"] // shape["n_head"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tok.tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t == EOT else gguf.TokenType.NORMAL for t in tok.tokens])
    w.add_token_merges(tok.merge_text)
    w.add_bos_token_id(tok.eot)
    w.add_eos_token_id(tok.eot)
    w.add_add_bos_token(True)

    def mat(name, t):
        data = gguf.quants.quantize(t.detach().float().numpy(), T.Q4_0)
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=T.Q4_0)

    def vec(name, t):
        w.add_tensor(name, t.detach().float().numpy().astype(np.float32))

    mat("token_embd.weight", model.emb.weight)
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", b.n1.weight)
        mat(p + "attn_q.weight", b.q.weight)
        mat(p + "attn_k.weight", b.k.weight)
        mat(p + "attn_v.weight", b.v.weight)
        mat(p + "attn_output.weight", b.o.weight)
        vec(p + "ffn_norm.weight", b.n2.weight)
        mat(p + "ffn_gate.weight", b.gate.weight)
        mat(p + "ffn_up.weight", b.up.weight)
        mat(p + "ffn_down.weight", b.down.weight)
    vec("output_norm.weight", model.norm.weight)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--merges", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    rng = np.random.default_rng(a.seed)
    texts = read_corpus()
    t0 = time.time()
    merges = train_bpe(texts, a.merges)
    tok = Tokenizer(merges)
    tok.merge_text = [f"{x} {y}" for x, y in merges]
    ids = []
    for t in texts:
        ids.append(tok.eot)
        ids.extend(tok.encode(t))
    data = torch.tensor(ids, dtype=torch.long)
    print(f"{len(texts)} fortunes, {len(tok.tokens)} tokens in the vocabulary, {len(ids)} training tokens "
          f"({time.time() - t0:.0f} s)", flush=True)
    shape = dict(SHAPE)
    model = LM(len(tok.tokens), **shape)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{n_params / 1e6:.2f} M parameters", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05, betas=(0.9, 0.95))
    ctx, batch = 128, 32
    deadline = time.time() + a.minutes * 60
    step, t_start = 0, time.time()
    while time.time() < deadline:
        frac = (time.time() - t_start) / (deadline - t_start)
        for g in opt.param_groups:
            g["lr"] = 3e-3 * min(1.0, step / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        starts = rng.integers(0, len(data) - ctx - 1, batch)
        x = torch.stack([data[s:s + ctx] for s in starts])
        y = torch.stack([data[s + 1:s + ctx + 1] for s in starts])
        loss = F.cross_entropy(model(x).view(-1, len(tok.tokens)), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f} ({time.time() - t_start:.0f} s)", flush=True)
        step += 1
    write_gguf(a.out + ".tmp", model, tok, shape)
    os.replace(a.out + ".tmp", a.out)
    print(f"wrote {a.out} after {step} steps, final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
