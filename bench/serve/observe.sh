#!/usr/bin/env bash
# What observability costs: throughput and latency of mcp2026-server with
# tracing off, sampling 1% and 100% of calls (exported over OTLP/HTTP to a
# local sink), and output monitoring at its default rate, side by side.
#
#   make build && bench/serve/observe.sh
#
# Each configuration is its own server on the tiny model (the server's own
# work dominates, so this is the worst case for per-call costs) and on the
# demo model, driven by `mcpctl bench` (HTTP binary v2, closed loop). The
# configurations alternate round by round (ROUNDS, default 3), because this
# VM's speed drifts; the table gives medians with the lowest and highest.
#
# Environment (all optional):
#   BUILD              build folder (default: build)
#   ROUNDS             rounds of every configuration (default 3)
#   BENCH_DURATION     time per concurrency level (default 5s)
#   BENCH_CONCURRENCY  levels (default 1,8)
#   BENCH_OUT          where results go (default: BUILD/bench-observe)
#   BASELINE_SERVER    another mcp2026-server binary (a build without tracing)
#                      run as one more configuration, "baseline"
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MCPCTL=$BUILD/bin/mcpctl
SERVER=$BUILD/bin/mcp2026-server
ROUNDS=${ROUNDS:-3}
DURATION=${BENCH_DURATION:-5s}
CONCURRENCY=${BENCH_CONCURRENCY:-1,8}
OUT=${BENCH_OUT:-$BUILD/bench-observe}
PY=/usr/bin/python3

for f in "$MCPCTL" "$SERVER"; do
  [ -x "$f" ] || { echo "bench: $f not found; run 'make build' first (or set BUILD)" >&2; exit 1; }
done

TMP=$(mktemp -d)
SERVER_PID=
SINK_PID=
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  fi
}
trap 'stop_server; [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
rm -f "$OUT"/*.json

"$PY" "$ROOT/tools/make_tiny_model.py" "$TMP/models" > /dev/null

# An OTLP/HTTP sink that takes every export and counts its bytes (the
# collector's own speed is not what is measured).
cat > "$TMP/sink.py" <<'EOF'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
"$PY" "$TMP/sink.py" > "$TMP/sink.port" &
SINK_PID=$!
for _ in $(seq 100); do [ -s "$TMP/sink.port" ] && break; sleep 0.05; done
SINK="http://127.0.0.1:$(cat "$TMP/sink.port")/v1/traces"

# The monitored model: the tiny and demo models with a descriptor whose
# monitoring section is the default (sampling on).
cp "$ROOT/models/demo/digits.onnx" "$TMP/models/digits.onnx"
for m in tiny digits; do
  printf 'name: %s\nformat: onnx\npath: %s.onnx\nmonitoring: {}\n' "$m" "$m" > "$TMP/models/$m-monitored.yaml"
done

# config -> server flags for MODEL
flags_for() {
  local config=$1 model=$2
  case "$config" in
    off|baseline) echo "--model-path $TMP/models/$model.onnx" ;;
    trace-1pct) echo "--model-path $TMP/models/$model.onnx --trace-endpoint $SINK --trace-sampler traceidratio --trace-sampler-arg 0.01" ;;
    trace-100pct) echo "--model-path $TMP/models/$model.onnx --trace-endpoint $SINK --trace-sampler always_on" ;;
    monitor) echo "--model-repository $TMP/monitored-$model" ;;
  esac
}
for m in tiny digits; do
  mkdir -p "$TMP/monitored-$m"
  cp "$TMP/models/$m.onnx" "$TMP/monitored-$m/"
  cp "$TMP/models/$m-monitored.yaml" "$TMP/monitored-$m/$m.yaml"
done

start_server() { # binary flags...
  local bin=$1
  shift
  # shellcheck disable=SC2068
  "$bin" $@ --host 127.0.0.1 --port 0 --grpc-port 0 > "$TMP/server.log" 2>&1 &
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

configs="off trace-1pct trace-100pct monitor"
[ -n "${BASELINE_SERVER:-}" ] && configs="baseline $configs"
# The log level must be known to the server (a baseline build may be older).
echo "observability cost: $ROUNDS rounds, $DURATION per level, concurrency $CONCURRENCY"
for round in $(seq "$ROUNDS"); do
  for model in tiny digits; do
    for config in $configs; do
      bin=$SERVER
      [ "$config" = baseline ] && bin=$BASELINE_SERVER
      # shellcheck disable=SC2046
      start_server "$bin" $(flags_for "$config" "$model")
      echo "  round $round: $model, $config ..."
      "$MCPCTL" bench "$model" --server "$URL" --protocol v2 --concurrency "$CONCURRENCY" --duration "$DURATION" --json \
        > "$OUT/$model-$config-$round.json" 2> "$TMP/bench.err" || { cat "$TMP/bench.err" >&2; }
      curl -s "$URL/metrics" > "$OUT/$model-$config-$round.metrics" || true
      stop_server
    done
  done
done

"$PY" - "$OUT" "$configs" <<'EOF' | tee "$OUT/summary.txt"
import glob, json, os, re, statistics, sys

out, configs = sys.argv[1], sys.argv[2].split()
def metric(path, name, **labels):
    total = 0.0
    try:
        text = open(path).read()
    except OSError:
        return None
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})?\s+(\S+)$", line)
        if m and m.group(1) == name and all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
            total += float(m.group(3))
    return total

print()
print("%-7s %-13s %5s %24s %22s %9s %12s" % ("model", "config", "conc", "req/s median [min..max]", "p50 us median [range]",
                                              "vs off", "spans/drop"))
for model in ("tiny", "digits"):
    base = {}
    for config in configs:
        runs = sorted(glob.glob(os.path.join(out, f"{model}-{config}-*.json")))
        by_conc = {}
        for r in runs:
            try:
                for l in json.load(open(r))["levels"]:
                    by_conc.setdefault(l["concurrency"], []).append(l)
            except (OSError, ValueError, KeyError):
                pass
        spans = drops = 0
        for r in runs:
            m = r[:-5] + ".metrics"
            spans += metric(m, "mcp_trace_spans_exported_total") or 0
            drops += metric(m, "mcp_trace_spans_dropped_total") or 0
        for conc, ls in sorted(by_conc.items()):
            rps = [l["req_per_s"] for l in ls if l["req_per_s"]]
            p50 = [l["p50_us"] for l in ls if l["p50_us"]]
            if not rps:
                continue
            med = statistics.median(rps)
            if config == "off":
                base[conc] = med
            rel = "%+.1f%%" % (100 * (med / base[conc] - 1)) if conc in base and config != "off" else ""
            print("%-7s %-13s %5d %10.0f [%6.0f..%6.0f] %8.1f [%5.1f..%5.1f] %9s %12s" % (
                model, config, conc, med, min(rps), max(rps), statistics.median(p50), min(p50), max(p50), rel,
                "%d/%d" % (spans, drops) if config.startswith("trace") else ""))
print("req/s and p50 from mcpctl bench (HTTP binary v2, closed loop); 'vs off' compares medians with tracing and")
print("monitoring off. Targets: tracing off within noise of a build without tracing (run with BASELINE_SERVER);")
print("100% sampling costs <= 10% throughput; output monitoring at its default rate costs <= 3%.")
EOF
