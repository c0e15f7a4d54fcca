#!/usr/bin/env bash
# LLM serving benchmark: mcp2026-server against llama.cpp's llama-server
# (built here from the source in the npm package node-llama-cpp, CPU only),
# same GGUF file, same threads, the same number of parallel sequences
# (llama-server's slots), driven by the same client: mcpctl bench
# --generate, streaming OpenAI completions at 1, 8 and 32 concurrent
# streams. Every request has its own prompt head (no prefix reuse in
# either engine), greedy, a fixed length (ignore_eos). The two engines
# alternate in every round; the report gives medians with the lowest and
# highest of the rounds: aggregate tokens/s, p50/p99 time to first token
# and inter-token latency, ours/llama-server.
#
#   make build && bench/llm/serve.sh
#   MODEL=bench-100m-Q4_0 THREADS=2 ROUNDS=3 LEVELS=1,8,32 bench/llm/serve.sh
#
# A second part shows the prefix cache and its isolation: the same long
# prompt from one tenant (cache hits, TTFT drops) and from another tenant
# (no block shared: the TTFT of a first request).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=${CACHE:-$ROOT/.cache/bench-llm}
MODEL=${MODEL:-bench-100m-Q8_0}
THREADS=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-3}
LEVELS=${LEVELS:-1,8,32}
SLOTS=${SLOTS:-32}
CTX=${CTX:-512}            # tokens per sequence
GEN=${GEN:-64}             # tokens per request
PER_STREAM=${PER_STREAM:-2} # requests per stream and level
OURS_PORT=${OURS_PORT:-18431}
LLAMA_PORT=${LLAMA_PORT:-18432}
MCPCTL=$ROOT/build/bin/mcpctl
SERVER=$ROOT/build/bin/mcp2026-server
[ -x "$MCPCTL" ] && [ -x "$SERVER" ] || { echo "bench: build first (make build)" >&2; exit 1; }
mkdir -p "$CACHE/models" "$CACHE/results"

bench/llm/build-llama.sh llama-server
LLAMA_SERVER=$ROOT/.cache/llama.cpp-build/bin/llama-server
f=$CACHE/models/$MODEL.gguf
if [ ! -f "$f" ]; then
  echo "bench: writing $MODEL into $CACHE/models (once)" >&2
  /usr/bin/python3 tools/make_llm_test_models.py "$CACHE/models" --bench --only "$MODEL" >/dev/null
fi

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_ready() { # URL PATH
  for _ in $(seq 600); do curl -sf "$1$2" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "bench: $1 did not come up" >&2; exit 1
}

# Ours: the same parallel sequences, context and threads as llama-server's slots.
mkdir -p "$work/models"
kv=$(( SLOTS * CTX * 64 * 1024 ))  # generous; the pool is reserved, not committed
cat > "$work/models/bench.yaml" <<YAML
name: bench
format: gguf
path: $f
instances: {threads: $THREADS}
generation: {max_sequences: $SLOTS, context_length: $CTX, kv_cache_bytes: $kv, step_tokens: 512, max_queue_size: 1024}
YAML
"$SERVER" --model-repository "$work/models" --model-root "$CACHE/models" --port "$OURS_PORT" \
  --grpc-port $((OURS_PORT + 2)) --host 127.0.0.1 > "$work/ours.log" 2>&1 &
pids+=($!)
"$LLAMA_SERVER" -m "$f" -t "$THREADS" -tb "$THREADS" -np "$SLOTS" -c $(( SLOTS * CTX )) -cb --host 127.0.0.1 \
  --port "$LLAMA_PORT" --no-webui -a bench > "$work/llama.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$OURS_PORT" /v2/models/bench/ready
wait_ready "http://127.0.0.1:$LLAMA_PORT" /health

out=$CACHE/results/serve-$(date +%Y%m%d-%H%M%S).jsonl
: > "$out"
for r in $(seq "$ROUNDS"); do
  order="ours llama"; [ $((r % 2)) -eq 0 ] && order="llama ours"
  for e in $order; do
    port=$OURS_PORT; [ "$e" = llama ] && port=$LLAMA_PORT
    line=$("$MCPCTL" bench --generate bench --server "http://127.0.0.1:$port" --concurrency "$LEVELS" \
             --rounds "$PER_STREAM" --max-tokens "$GEN" --temperature 0 --ignore-eos --json | tr -d '\n')
    echo "{\"kind\":\"$e\",\"model\":\"$MODEL\",\"threads\":$THREADS,\"round\":$r,\"result\":$line}" >> "$out"
    echo "bench: round $r $e done" >&2
  done
done

# The prefix cache: one long prompt, first from tenant a (computed), then
# again from a (reused), then from tenant b (computed again: isolated).
long=$(printf 'The quick brown fox jumps over the lazy dog while the farmer watches. %.0s' $(seq 20))
for t in a a a b b; do
  line=$("$MCPCTL" generate --server "http://127.0.0.1:$OURS_PORT" bench --prompt "$long" --max-tokens 1 \
           --greedy --tenant "$t" --json)
  echo "{\"kind\":\"prefix\",\"tenant\":\"$t\",\"result\":$line}" >> "$out"
done
curl -s "http://127.0.0.1:$OURS_PORT/v2/models/bench/stats" | tr -d '\n' | sed 's/^/{"kind":"stats","result":/; s/$/}\n/' >> "$out"
/usr/bin/python3 bench/llm/serve_report.py "$out"
