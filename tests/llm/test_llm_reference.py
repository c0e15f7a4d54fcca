#!/usr/bin/env python3
"""The LLM runtime against an independent reference (tools/llm_reference.py,
python3-torch in float64 on the same weights dequantized by gguf-py), for
random-weight models of every supported architecture and weight type
(tools/make_llm_test_models.py):

- precise mode (fp32 activations, F32 KV cache): every prompt position's
  logits within 1e-4 relative; 64 greedy tokens identical;
- fast mode (int8 activations for Q8_0 / Q4_0 weights, F16 KV cache):
  logits within 5e-2 relative (Q4_K / Q6_K weights, in the Q4_K_M mix,
  meet fp32 activations in both modes);
- the cache: a prompt fed one token at a time gives the logits of the
  one-batch pass; three sequences of different lengths decoded together in
  one interleaved batch give what each gives alone.

Environment: LLM_RUN (the llm_run driver), MCP_SOURCE_DIR.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC = os.environ.get("MCP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LLM_RUN = os.environ.get("LLM_RUN", os.path.join(SRC, "build", "bin", "llm_run"))
PY = sys.executable
PROMPT = [1, 450, 4996, 17354, 432, 3, 99, 1000, 263, 7, 31999, 12, 5000, 8, 2]
GREEDY = 64

_models = None
_tmp = None


def models():
    """The models of LLM_MODELS_DIR (ctest's llm_models fixture writes them),
    or generated once per run."""
    global _models, _tmp
    if _models is None:
        where = os.environ.get("LLM_MODELS_DIR")
        if not where:
            _tmp = tempfile.TemporaryDirectory(prefix="mcp-llm-ref-")
            where = _tmp.name
            subprocess.run([PY, os.path.join(SRC, "tools", "make_llm_test_models.py"), where], check=True,
                           capture_output=True)
        _models = {f[:-5]: os.path.join(where, f) for f in os.listdir(where) if f.endswith(".gguf")}
    return _models


def run_ours(model, out, *extra):
    r = subprocess.run([LLM_RUN, model, out, "--tokens", ",".join(map(str, PROMPT)), "--greedy", str(GREEDY), *extra],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"llm_run {os.path.basename(model)} {' '.join(extra)}: {r.stderr}")
    return json.loads(r.stdout)


def run_reference(model, out):
    subprocess.run([PY, os.path.join(SRC, "tools", "llm_reference.py"), model, out, "--tokens",
                    ",".join(map(str, PROMPT)), "--greedy", str(GREEDY)], check=True, timeout=1200)


def read(out, name):
    if name.endswith(".f32"):
        return np.fromfile(os.path.join(out, name), dtype=np.float32)
    with open(os.path.join(out, name)) as f:
        return [int(x) for x in f.read().split()]


class ReferenceTests(unittest.TestCase):
    def check_model(self, name):
        path = models()[name]
        with tempfile.TemporaryDirectory() as out:
            run_reference(path, out)
            ref, ref_greedy = read(out, "ref_logits.f32"), read(out, "ref_greedy.txt")
            scale = float(np.abs(ref).max())
            self.assertGreater(scale, 0.1, "the reference logits are not degenerate")
            # Precise: exact against the dequantized weights.
            stats = run_ours(path, out, "--precise", "--kv", "f32")
            ours = read(out, "logits.f32")
            self.assertEqual(ours.shape, ref.shape)
            rel = float(np.abs(ours - ref).max()) / scale
            self.assertLess(rel, 1e-4, f"{name}: precise logits differ by {rel:.3g} relative")
            self.assertEqual(read(out, "greedy.txt"), ref_greedy, f"{name}: greedy tokens differ")
            self.assertLess(stats["cache_max_rel"], 1e-5, f"{name}: stepwise decoding through the cache")
            self.assertLess(stats["batch_max_rel"], 1e-5, f"{name}: a mixed batch against each sequence alone")
            # Fast: what serving runs.
            stats = run_ours(path, out, "--kv", "f16")
            fast = read(out, "logits.f32")
            rel_fast = float(np.abs(fast - ref).max()) / scale
            self.assertLess(rel_fast, 5e-2, f"{name}: fast logits differ by {rel_fast:.3g} relative")
            self.assertLess(stats["cache_max_rel"], 1e-3, f"{name}: fast stepwise decoding through the cache")
            self.assertLess(stats["batch_max_rel"], 1e-3, f"{name}: fast mixed batch")
            print(f"{name}: precise {rel:.2e}, fast {rel_fast:.2e}, cache {stats['cache_max_rel']:.1e}, "
                  f"batch {stats['batch_max_rel']:.1e} ({stats['isa']})", file=sys.stderr)


# Sanitizer builds (unoptimised) compare one model of each architecture:
# they look for memory errors; the release build compares every model.
_ONLY = set(filter(None, os.environ.get("LLM_REFERENCE_ONLY", "").split(",")))


def _add(name):
    if _ONLY and name not in _ONLY:
        return
    setattr(ReferenceTests, "test_" + name.replace("-", "_"), lambda self: self.check_model(name))


for _arch in ("llama", "qwen2", "gpt2"):
    for _type in ("F32", "F16", "BF16", "Q8_0", "Q4_0"):
        _add(f"{_arch}-{_type}")
for _variant in ("llama-tied-F32", "llama-ropefreqs-F32", "llama-ropelinear-F32", "mistral-F32", "llama-Q4_K_M",
                 "qwen2-Q4_K_M"):
    _add(_variant)


if __name__ == "__main__":
    unittest.main()
