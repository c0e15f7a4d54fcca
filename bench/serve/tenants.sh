#!/usr/bin/env bash
# Per-tenant QoS, measured on a server with access rules:
#  1. isolation: tenant t1's latency alone, and while tenant t3 floods the
#     same model at FLOOD_RATE requests per second (open loop, 40 times its
#     rate limit of 50/s; t3 gets 429s); target: t1's p99 within 2x of its
#     unloaded value. Also shown: t3 flooding as fast as 16 closed-loop
#     clients can, which on a small machine measures the CPU the load
#     generator takes from the server as much as the server's isolation;
#  2. fair share: tenants t1 (weight 2) and t2 (weight 1) saturating one
#     slow model at the same concurrency; target: requests 2:1 within 10%.
#
#   make build && bench/serve/tenants.sh
#
# Load comes from `mcpctl bench` (HTTP binary v2, closed loop) with each
# tenant's API key in $MCP_TOKEN. The two cases of (1) alternate round by
# round (ROUNDS, default 3) because this VM's speed drifts; the summary
# gives medians with the lowest and highest.
#
# Environment (all optional):
#   BUILD           build folder (default: build)
#   ROUNDS          rounds (default 3)
#   BENCH_DURATION  time per run (default 5s)
#   FLOOD_RATE      t3's offered load in requests per second (default 2000)
#   BENCH_OUT       where results go (default: BUILD/bench-tenants)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MCPCTL=$BUILD/bin/mcpctl
SERVER=$BUILD/bin/mcp2026-server
ROUNDS=${ROUNDS:-3}
DURATION=${BENCH_DURATION:-5s}
FLOOD_RATE=${FLOOD_RATE:-2000}
OUT=${BENCH_OUT:-$BUILD/bench-tenants}
PY=/usr/bin/python3

for f in "$MCPCTL" "$SERVER"; do
  [ -x "$f" ] || { echo "bench: $f not found; run 'make build' first (or set BUILD)" >&2; exit 1; }
done

TMP=$(mktemp -d)
SERVER_PID=
trap '[ -n "$SERVER_PID" ] && kill -TERM "$SERVER_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
mkdir -p "$OUT" "$TMP/models"
rm -f "$OUT"/*.json
"$PY" "$ROOT/tools/make_e2e_models.py" "$TMP/gen" > /dev/null
cp "$TMP/gen/digits_slow.onnx" "$ROOT/models/demo/digits.onnx" "$TMP/models/"

KEY_ADMIN=bench-admin-key-0001
KEY_T1=bench-t1-invoker-0001
KEY_T2=bench-t2-invoker-0001
KEY_T3=bench-t3-invoker-0001
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat > "$TMP/keys.yaml" <<EOF
- {sha256: $(sha $KEY_ADMIN), subject: bench, roles: [admin]}
- {sha256: $(sha $KEY_T1), tenant: t1, roles: [invoker]}
- {sha256: $(sha $KEY_T2), tenant: t2, roles: [invoker]}
- {sha256: $(sha $KEY_T3), tenant: t3, roles: [invoker]}
EOF
cat > "$TMP/server.yaml" <<EOF
auth:
  api_keys_file: keys.yaml
tenants:
  t1: {weight: 2}
  t2: {weight: 1}
  t3: {rps: 50, burst: 50}
EOF
cat > "$TMP/models/slowfair.yaml" <<EOF
name: slowfair
format: onnx
path: digits_slow.onnx
max_batch_size: 0
instances: {count: 1, threads: 1}
EOF

"$SERVER" --config "$TMP/server.yaml" --model-path "$TMP/models/digits.onnx" --model-root "$TMP/models" \
  --host 127.0.0.1 --port 0 --grpc-port 0 > "$TMP/server.log" 2>&1 &
SERVER_PID=$!
URL=
for _ in $(seq 300); do
  URL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$TMP/server.log" | head -1 || true)
  [ -n "$URL" ] && curl -sf "$URL/v2/health/ready" > /dev/null && break
  sleep 0.1
done
[ -n "$URL" ] || { echo "bench: the server did not start:" >&2; cat "$TMP/server.log" >&2; exit 1; }
MCP_TOKEN=$KEY_ADMIN "$MCPCTL" apply -f "$TMP/models/slowfair.yaml" --server "$URL" > /dev/null

bench() { # key model concurrency duration out [mcpctl bench options]
  MCP_TOKEN=$1 "$MCPCTL" bench "$2" --server "$URL" --protocol v2 --concurrency "$3" --duration "$4" --json "${@:6}" \
    > "$5" 2> "$5.err" || true
}

echo "tenant QoS: $ROUNDS rounds, $DURATION per run"
for round in $(seq "$ROUNDS"); do
  echo "  round $round: t1 alone ..."
  bench $KEY_T1 digits 4 "$DURATION" "$OUT/alone-$round.json"
  echo "  round $round: t1 while t3 floods at $FLOOD_RATE req/s ..."
  bench $KEY_T3 digits 16 "$(( ${DURATION%s} + 2 ))s" "$OUT/flood-t3-$round.json" --rate "$FLOOD_RATE" &
  flood=$!
  sleep 1
  bench $KEY_T1 digits 4 "$DURATION" "$OUT/flooded-$round.json"
  wait $flood
  echo "  round $round: t1 while t3 floods with 16 closed-loop clients ..."
  bench $KEY_T3 digits 16 "$(( ${DURATION%s} + 2 ))s" "$OUT/saturate-t3-$round.json" &
  flood=$!
  sleep 1
  bench $KEY_T1 digits 4 "$DURATION" "$OUT/saturated-$round.json"
  wait $flood
  echo "  round $round: t1 (weight 2) and t2 (weight 1) on slowfair ..."
  bench $KEY_T2 slowfair 6 "$DURATION" "$OUT/fair-t2-$round.json" &
  other=$!
  bench $KEY_T1 slowfair 6 "$DURATION" "$OUT/fair-t1-$round.json"
  wait $other
done
curl -s -H "Authorization: Bearer $KEY_ADMIN" "$URL/metrics" | grep '^mcp_tenant_requests_total' > "$OUT/tenant-metrics.txt" || true

"$PY" - "$OUT" "$ROUNDS" "$FLOOD_RATE" "$(nproc)" <<'EOF' | tee "$OUT/summary.txt"
import json, os, statistics, sys

out, rounds, flood_rate, cores = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def level(name):
    try:
        return json.load(open(os.path.join(out, name)))["levels"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None
def med(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (float("nan"),) * 3
alone = [level(f"alone-{r}.json") for r in range(1, rounds + 1)]
flooded = [level(f"flooded-{r}.json") for r in range(1, rounds + 1)]
saturated = [level(f"saturated-{r}.json") for r in range(1, rounds + 1)]
t3 = [level(f"flood-t3-{r}.json") for r in range(1, rounds + 1)]
print()
print("t1 on digits, concurrency 4    p50 us median [range]     p99 us median [range]     req/s   (%s cores, "
      "clients and server on the same machine)" % cores)
for what, ls in (("alone", alone), ("t3 at %s req/s" % flood_rate, flooded), ("t3 16 closed-loop clients", saturated)):
    p50 = med([l and l["p50_us"] for l in ls])
    p99 = med([l and l["p99_us"] for l in ls])
    rps = med([l and l["req_per_s"] for l in ls])
    print("  %-28s %8.0f [%6.0f..%6.0f]  %8.0f [%6.0f..%6.0f]  %7.0f" % (what, *p50, *p99, rps[0]))
def p99_ratio(loaded):
    return med([f["p99_us"] / a["p99_us"] for a, f in zip(alone, loaded) if a and f and a["p99_us"]])
print("  t1 p99, t3 at %s req/s / alone: %.2fx [%.2f..%.2f] (target <= 2x)" % (flood_rate, *p99_ratio(flooded)))
print("  t1 p99, t3 closed-loop / alone: %.2fx [%.2f..%.2f]" % p99_ratio(saturated))
sat_t3 = [level(f"saturate-t3-{r}.json") for r in range(1, rounds + 1)]
print("  t3's closed-loop clients sent %.0f req/s [%.0f..%.0f]" % med([l and l["requests"] / l["seconds"] for l in sat_t3]))
print("  t3 sent %.0f req/s [%.0f..%.0f]; answered 200: %.0f req/s (its limit: 50), the rest 429" %
      (*med([l and l["requests"] / l["seconds"] for l in t3]), med([l and l["req_per_s"] for l in t3])[0]))
shares = []
for n in range(1, rounds + 1):
    a, b = level(f"fair-t1-{n}.json"), level(f"fair-t2-{n}.json")
    if a and b and b["req_per_s"]:
        shares.append(a["req_per_s"] / b["req_per_s"])
s = med(shares)
print("fair share on slowfair (t1 weight 2 : t2 weight 1, 6 clients each): %.2f [%.2f..%.2f] (target 2.0 +- 10%%)" % s)
try:
    print("tenant counters:\n  " + open(os.path.join(out, "tenant-metrics.txt")).read().strip().replace("\n", "\n  "))
except OSError:
    pass
EOF
