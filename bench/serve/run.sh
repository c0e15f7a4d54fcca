#!/usr/bin/env bash
# Serving benchmark: the demo model and an identity-like tiny model, each
# with batching off and on, under `mcpctl bench` at several concurrency
# levels; prints one side-by-side table and the targets of issue 3.
#
#   make build && bench/serve/run.sh
#
# Environment (all optional):
#   BUILD              build folder holding bin/mcpctl and bin/mcp2026-server (default: build)
#   BENCH_DURATION     time per concurrency level (default 5s; at most 600s)
#   BENCH_CONCURRENCY  levels (default 1,8,64)
#   SERVER_CPUS        CPUs the server is pinned to (taskset list; default 0,1 when the
#                      machine has 4 or more, else no pinning)
#   CLIENT_CPUS        CPUs mcpctl bench is pinned to (default: the others)
#   SERVER_WORKERS     instance workers per model (default: number of server CPUs, at most 2 when unpinned)
#   SERVER_ARGS        extra mcp2026-server flags, e.g. "--max-queue-delay-us 200"
#   BENCH_OUT          where the JSON results and the table go (default: BUILD/bench-serve)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MCPCTL=$BUILD/bin/mcpctl
SERVER=$BUILD/bin/mcp2026-server
DURATION=${BENCH_DURATION:-5s}
CONCURRENCY=${BENCH_CONCURRENCY:-1,8,64}
OUT=${BENCH_OUT:-$BUILD/bench-serve}
PY=/usr/bin/python3

for f in "$MCPCTL" "$SERVER"; do
  [ -x "$f" ] || { echo "bench: $f not found; run 'make build' first (or set BUILD)" >&2; exit 1; }
done
if grep -qs '^CMAKE_BUILD_TYPE:[A-Z]*=Debug' "$BUILD/CMakeCache.txt"; then
  echo "bench: note: $BUILD is a Debug build; figures will be slower than a Release build" >&2
fi

NCPU=$(nproc 2>/dev/null || echo 1)
if [ -z "${SERVER_CPUS+x}" ]; then
  if [ "$NCPU" -ge 4 ]; then SERVER_CPUS=0,1; CLIENT_CPUS=${CLIENT_CPUS:-2-$((NCPU - 1))}; else SERVER_CPUS=; fi
fi
CLIENT_CPUS=${CLIENT_CPUS:-}
count_cpus() { # taskset list -> number of CPUs
  local n=0 part
  IFS=, read -ra parts <<< "$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then n=$((n + ${part#*-} - ${part%-*} + 1)); else n=$((n + 1)); fi
  done
  echo "$n"
}
if [ -n "$SERVER_CPUS" ]; then SERVER_NCPU=$(count_cpus "$SERVER_CPUS"); else SERVER_NCPU=$NCPU; fi
WORKERS=${SERVER_WORKERS:-$([ -n "$SERVER_CPUS" ] && echo "$SERVER_NCPU" || echo $((NCPU < 2 ? 1 : 2)))}
server_pin=(); client_pin=()
[ -n "$SERVER_CPUS" ] && server_pin=(taskset -c "$SERVER_CPUS")
[ -n "$CLIENT_CPUS" ] && client_pin=(taskset -c "$CLIENT_CPUS")

TMP=$(mktemp -d)
SERVER_PID=
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}
trap 'stop_server; rm -rf "$TMP"' EXIT
mkdir -p "$OUT"

"$PY" "$ROOT/tools/make_tiny_model.py" "$TMP/models" > /dev/null

# start_server MODEL.onnx EXTRA_FLAGS...  -> sets URL
start_server() {
  local model=$1
  shift
  # shellcheck disable=SC2086
  "${server_pin[@]}" "$SERVER" --model-path "$model" --host 127.0.0.1 --port 0 --workers "$WORKERS" \
    "$@" ${SERVER_ARGS:-} > "$TMP/server.log" 2>&1 &
  SERVER_PID=$!
  URL=
  for _ in $(seq 300); do
    URL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$TMP/server.log" | head -1 || true)
    [ -n "$URL" ] && "$MCPCTL" get models --server "$URL" > /dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench: the server did not start:" >&2
  cat "$TMP/server.log" >&2
  exit 1
}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "serving benchmark: $DURATION per level, concurrency $CONCURRENCY, server CPUs ${SERVER_CPUS:-all $NCPU} ($WORKERS workers), client CPUs ${CLIENT_CPUS:-shared}"
runs=()
for model in "$ROOT/models/demo/digits.onnx" "$TMP/models/tiny.onnx"; do
  name=$(basename "$model" .onnx)
  # Batching off: every protocol side by side (HTTP binary, HTTP JSON,
  # gRPC); batching on: HTTP binary, for the batching target.
  for batching in off on; do
    flags=()
    [ "$batching" = off ] && flags=(--max-batch-size 0)
    GRPC_PORT=$(free_port)
    start_server "$model" --grpc-port "$GRPC_PORT" "${flags[@]}"
    protocols="v2 v2-json grpc grpc-stream"
    [ "$batching" = on ] && protocols="v2"
    for proto in $protocols; do
      echo "  $name, batching $batching, $proto ..."
      result="$OUT/$name-batching-$batching-$proto.json"
      if ! "${client_pin[@]}" "$MCPCTL" bench "$name" --server "$URL" --grpc "127.0.0.1:$GRPC_PORT" --protocol "$proto" \
        --concurrency "$CONCURRENCY" --duration "$DURATION" --json > "$result" 2> "$TMP/bench.err"; then
        echo "bench: mcpctl bench failed for $name (batching $batching, $proto):" >&2
        cat "$TMP/bench.err" >&2
      fi
      [ -s "$TMP/bench.err" ] && sed 's/^/    /' "$TMP/bench.err" >&2
      runs+=("$name:$batching:$proto:$result")
    done
    stop_server
  done
done

"$PY" - "$SERVER_NCPU" "${runs[@]}" <<'EOF' | tee "$OUT/summary.txt"
import json, math, sys

server_cpus = int(sys.argv[1])
rows = {}
for arg in sys.argv[2:]:
    model, batching, proto, path = arg.split(":", 3)
    try:
        rows[(model, batching, proto)] = json.load(open(path))["levels"]
    except (OSError, ValueError, KeyError):
        rows[(model, batching, proto)] = []

def fmt(v, prec=1):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{prec}f}"

head = ("model", "batching", "protocol", "conc", "req/s", "p50_us", "p99_us", "overhead_us", "queue_us", "compute_us",
        "avg_batch", "errors")
print()
print("%-7s %-8s %-8s %5s %10s %9s %9s %11s %9s %10s %9s %6s" % head)
for (model, batching, proto), levels in rows.items():
    if not levels:
        print("%-7s %-8s %-8s  (no results)" % (model, batching, proto))
    for l in levels:
        s = l["server"]
        print("%-7s %-8s %-8s %5d %10s %9s %9s %11s %9s %10s %9s %6d" % (
            model, batching, proto, l["concurrency"], fmt(l["req_per_s"]), fmt(l["p50_us"]), fmt(l["p99_us"]),
            fmt(s["overhead_us"]), fmt(s["queue_us"]), fmt(s["compute_us"]), fmt(s["avg_batch"], 2), l["errors"]))
print("p50/p99: client latency; overhead = the server's average total latency minus its average compute time per")
print("request, queue_us (part of the overhead) and compute_us: server averages per request, all from /metrics")

def level(model, batching, conc, proto="v2"):
    for l in rows.get((model, batching, proto), []):
        if l["concurrency"] == conc:
            return l
    return None

def verdict(ok):
    return "n/a " if ok is None else ("PASS" if ok else "MISS")

print()
print("targets (issues 3 and 9):")
l = level("tiny", "off", 1)
ovh = l["server"]["overhead_us"] if l else None
print("  %s server overhead at concurrency 1 <= 30 us (Triton documents 36 us): tiny, batching off: %s us"
      % (verdict(None if ovh is None else ovh <= 30), fmt(ovh)))
others = []
for m, b in (("tiny", "on"), ("digits", "off"), ("digits", "on")):
    x = level(m, b, 1)
    if x:
        others.append("%s/%s %s us" % (m, b, fmt(x["server"]["overhead_us"])))
if others:
    print("       (others at concurrency 1: %s)" % ", ".join(others))
best = max((l["req_per_s"] for b in ("off", "on") for l in rows.get(("tiny", b, "v2"), []) if l["req_per_s"]), default=None)
tiny_ok = None if best is None or server_cpus > 2 else best >= 30000
print("  %s tiny model >= 30,000 req/s on 2 server cores: best %s req/s on %d server CPU%s%s"
      % (verdict(tiny_ok), fmt(best, 0), server_cpus, "" if server_cpus == 1 else "s",
         " (pin the server to 2 CPUs with SERVER_CPUS to judge)" if server_cpus > 2 else ""))
def best_rps(model, proto):
    return max((l["req_per_s"] for l in rows.get((model, "off", proto), []) if l["req_per_s"]), default=None)
g, j = best_rps("tiny", "grpc"), best_rps("tiny", "v2-json")
gr = g / j if g and j else None
print("  %s gRPC >= 1.3x HTTP JSON on the tiny model (best level each): %s / %s req/s = %sx"
      % (verdict(None if gr is None else gr >= 1.3), fmt(g, 0), fmt(j, 0), fmt(gr, 2)))
gs = best_rps("tiny", "grpc-stream")
print("       (ModelStreamInfer, one stream per client: %s req/s = %sx)" % (fmt(gs, 0), fmt(gs / j if gs and j else None, 2)))
for conc in (1, 8, 64):
    cells = []
    for proto in ("v2", "v2-json", "grpc", "grpc-stream"):
        x = level("tiny", "off", conc, proto)
        if x:
            cells.append("%s %s req/s p50 %s p99 %s us" % (proto, fmt(x["req_per_s"], 0), fmt(x["p50_us"]), fmt(x["p99_us"])))
    if cells:
        print("       tiny, concurrency %d: %s" % (conc, "; ".join(cells)))
off, on = level("digits", "off", 64), level("digits", "on", 64)
ratio = on["req_per_s"] / off["req_per_s"] if off and on and off["req_per_s"] else None
print("  %s demo model, concurrency 64: batching on >= 3x batching off: %s / %s req/s = %sx"
      % (verdict(None if ratio is None else ratio >= 3), fmt(on["req_per_s"] if on else None, 0),
         fmt(off["req_per_s"] if off else None, 0), fmt(ratio, 2)))
EOF
echo "results: $OUT"
