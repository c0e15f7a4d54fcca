#!/usr/bin/env bash
# Hot-swap benchmark (issue 10): phases of a swap (load and warm-up, verify,
# swap, drain) for the demo model and ResNet-50, and client p99 during swaps
# against steady state, in alternating runs.
#
#   make build && bench/rollout/run.sh
#
# Environment (all optional):
#   BUILD              build folder with bin/mcpctl and bin/mcp2026-server (default: build)
#   BENCH_DURATION     length of each mcpctl bench run (default 5s)
#   BENCH_CONCURRENCY  clients (default 8)
#   BENCH_ROUNDS       steady/swaps pairs (default 3)
#   MODELS             "digits resnet50" (default); resnet50 is exported by
#                      tools/export_bench_models.py (python3-torch) into the cache
#   BENCH_OUT          results (default: BUILD/bench-rollout)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${BENCH_OUT:-$BUILD/bench-rollout}
CACHE=$BUILD/bench-cache
MODELS=${MODELS:-"digits resnet50"}
for f in "$BUILD/bin/mcpctl" "$BUILD/bin/mcp2026-server"; do
  [ -x "$f" ] || { echo "bench: $f not found; run 'make build' first (or set BUILD)" >&2; exit 1; }
done
mkdir -p "$CACHE" "$OUT"
specs=()
for m in $MODELS; do
  if [ "$m" = digits ]; then
    specs+=("$ROOT/models/demo/digits.onnx:$ROOT/models/demo/sample_0.npy")
  else
    [ -f "$CACHE/$m.onnx" ] || /usr/bin/python3 "$ROOT/tools/export_bench_models.py" "$CACHE" "$m" >&2
    /usr/bin/python3 -c "import numpy as np,sys; a=np.load(sys.argv[1]); np.save(sys.argv[2], a[:1])" \
      "$CACHE/$m.input.npy" "$CACHE/$m.input1.npy"
    specs+=("$CACHE/$m.onnx:$CACHE/$m.input1.npy")
  fi
done
/usr/bin/python3 "$ROOT/bench/rollout/swap_bench.py" "$BUILD/bin/mcp2026-server" "$BUILD/bin/mcpctl" "$OUT" "${specs[@]}" \
  | tee "$OUT/summary.txt"
