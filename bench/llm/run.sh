#!/usr/bin/env bash
# LLM benchmark: our runtime (mcpctl perf) against llama.cpp (llama-bench,
# built here from the source in the npm package node-llama-cpp, CPU only) on
# the same GGUF files, same threads, alternating the two in every round.
#
#   make build && bench/llm/run.sh
#   MODELS="bench-100m-Q4_0" THREADS=2 ROUNDS=5 bench/llm/run.sh
#
# Models (tools/make_llm_test_models.py --bench, random weights): a ~100 M
# parameter Llama (SmolLM-135M's shape) and a ~1 B one (TinyLlama-1.1B's),
# each in F16, Q8_0 and Q4_0. For each model and thread count it prints
# prefill (PP tokens) and decode (TG tokens, from an empty context, as
# llama-bench's tg) tokens/s for both, medians over the rounds with the
# lowest and highest, the ratio ours/llama.cpp, our load time, and the
# bandwidth ceiling: the measured streaming bandwidth divided by the weight
# bytes a token reads. Everything fetched or built lives in .cache/.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=${CACHE:-$ROOT/.cache/bench-llm}
MCPCTL=$ROOT/build/bin/mcpctl
MODELS=${MODELS:-"bench-100m-F16 bench-100m-Q8_0 bench-100m-Q4_0 bench-1b-F16 bench-1b-Q8_0 bench-1b-Q4_0"}
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-3}
PP=${PP:-512}
TG=${TG:-128}
mkdir -p "$CACHE/models" "$CACHE/results"

[ -x "$MCPCTL" ] || { echo "bench: build first (make build)" >&2; exit 1; }
bench/llm/build-llama.sh llama-bench
LLAMA_BENCH=$ROOT/.cache/llama.cpp-build/bin/llama-bench
echo "bench: writing the benchmark models into $CACHE/models (once)" >&2
/usr/bin/python3 tools/make_llm_test_models.py "$CACHE/models" --bench >/dev/null
cc -O3 -march=native -fopenmp bench/llm/bandwidth.c -o "$CACHE/bandwidth"

out=$CACHE/results/run-$(date +%Y%m%d-%H%M%S).jsonl
: > "$out"
for t in $THREADS; do
  bw=$("$CACHE/bandwidth" "$t" 2>/dev/null)
  echo "{\"kind\":\"bandwidth\",\"threads\":$t,\"gb_per_s\":$bw}" >> "$out"
done
for m in $MODELS; do
  f=$CACHE/models/$m.gguf
  for t in $THREADS; do
    for r in $(seq "$ROUNDS"); do
      # Alternate which engine goes first, so drift hits both alike.
      order="ours llama"; [ $((r % 2)) -eq 0 ] && order="llama ours"
      for e in $order; do
        if [ "$e" = ours ]; then
          line=$("$MCPCTL" perf "$f" --prompt-tokens "$PP" --gen-tokens "$TG" --threads "$t" --repeat 1 --json)
          echo "{\"kind\":\"ours\",\"model\":\"$m\",\"threads\":$t,\"round\":$r,\"result\":$line}" >> "$out"
        else
          line=$("$LLAMA_BENCH" -m "$f" -p "$PP" -n "$TG" -t "$t" -r 1 -o json 2>/dev/null | tr -d '\n')
          echo "{\"kind\":\"llama\",\"model\":\"$m\",\"threads\":$t,\"round\":$r,\"result\":$line}" >> "$out"
        fi
      done
    done
  done
done
/usr/bin/python3 bench/llm/report.py "$out"
