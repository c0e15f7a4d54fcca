#!/usr/bin/env bash
# Builds llama.cpp's TARGETS (llama-bench, llama-server) from the source in
# the npm package node-llama-cpp (tools/fetch-llama-cpp.sh), CPU only, native
# ISA, into .cache/llama.cpp-build; a target already built is kept.
#   bench/llm/build-llama.sh llama-bench llama-server
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
tools/fetch-llama-cpp.sh
LLAMA_SRC=${MCP_LLAMA_CPP_DIR:-$ROOT/.cache/llama.cpp}
LLAMA_BUILD=$ROOT/.cache/llama.cpp-build
for t in "$@"; do
  [ -x "$LLAMA_BUILD/bin/$t" ] && continue
  echo "bench: building llama.cpp's $t (CPU, native) in $LLAMA_BUILD" >&2
  # Native ISA without AMX: the CPU may report AMX that the kernel has not
  # enabled for user space (llama.cpp then dies on its first tile
  # instruction), and our kernels do not use it either.
  cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
        "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
        "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" >/dev/null
  cmake --build "$LLAMA_BUILD" --target "$t" -j "$(nproc)" >/dev/null
done
