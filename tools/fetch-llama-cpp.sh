#!/usr/bin/env bash
# Fetches llama.cpp's source from the npm package node-llama-cpp, which
# carries it as a git bundle (llama/gitRelease.bundle), and clones it into
# .cache/llama.cpp (or $MCP_LLAMA_CPP_DIR). The LLM tests read its vocab-only
# GGUF files and their test vectors (models/ggml-vocab-*.gguf{,.inp,.out});
# the model scripts use its gguf-py; bench/llm builds it as the speed anchor.
# Nothing fetched here is committed. Idempotent: a complete clone is kept.
set -euo pipefail

VERSION="${NODE_LLAMA_CPP_VERSION:-3.22.1}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${MCP_LLAMA_CPP_DIR:-$ROOT/.cache/llama.cpp}"
STAMP="$DEST/.mcp-fetched-$VERSION"

if [ -f "$STAMP" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch-llama-cpp: npm is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
command -v git >/dev/null || { echo "fetch-llama-cpp: git is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fetch-llama-cpp: npm pack node-llama-cpp@$VERSION"
(cd "$work" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null)
tar -xzf "$work/node-llama-cpp-$VERSION.tgz" -C "$work" package/llama/gitRelease.bundle
rm -rf "$DEST.tmp"
mkdir -p "$(dirname "$DEST")"
git -c advice.detachedHead=false clone -q "$work/package/llama/gitRelease.bundle" "$DEST.tmp"
for f in gpt-2 llama-bpe llama-spm qwen2 phi-3; do
  [ -f "$DEST.tmp/models/ggml-vocab-$f.gguf.inp" ] || { echo "fetch-llama-cpp: the bundle has no models/ggml-vocab-$f.gguf.inp" >&2; exit 1; }
done
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
touch "$STAMP"
echo "fetch-llama-cpp: llama.cpp $(git -C "$DEST" rev-parse --short HEAD) in $DEST"
