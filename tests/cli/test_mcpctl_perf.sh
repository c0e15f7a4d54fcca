#!/usr/bin/env bash
# mcpctl perf on the demo model: --json prints one JSON object whose four
# required keys are positive numbers, --batch works, and bad arguments or a
# missing model exit non-zero with one line on stderr. mcpctl compile: the
# compiled demo runs as the ONNX one, warns when loaded for other threads,
# and bad arguments or files are refused the same way.
set -u
MCPCTL=$1
DEMO=$2
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { # description, condition result
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi
}

# Reads one JSON object on stdin; checks the keys, and batch when given.
check_json() { # batch
  "$PY" -c '
import json, sys
want_batch = int(sys.argv[1])
text = sys.stdin.read()
obj = json.loads(text)
assert isinstance(obj, dict), "not an object"
assert text.strip().count("\n") == 0, "more than one line"
for k in ("load_ms", "median_ms", "p90_ms", "peak_rss_mb"):
    v = obj[k]
    assert isinstance(v, (int, float)) and not isinstance(v, bool), "%s is not a number" % k
    assert v > 0, "%s = %r is not positive" % (k, v)
assert obj["p90_ms"] >= obj["median_ms"], "p90 below median"
assert obj.get("batch", want_batch) == want_batch, "batch %r" % obj.get("batch")
' "$1"
}

# Note: "$?" is saved before any $(...) in a description can overwrite it.
"$MCPCTL" perf "$DEMO/digits.onnx" --iterations 5 --json > "$TMP/out.json" 2> "$TMP/err"
rc=$?
check "perf --iterations 5 --json exits 0 ($(cat "$TMP/err"))" $rc
check_json 1 < "$TMP/out.json"
rc=$?
check "JSON has load_ms, median_ms, p90_ms, peak_rss_mb > 0 ($(cat "$TMP/out.json"))" $rc

"$MCPCTL" perf "$DEMO/digits.onnx" --batch 4 --warmup 1 --iterations 3 --json > "$TMP/out4.json" 2> "$TMP/err"
rc=$?
check "perf --batch 4 exits 0 ($(cat "$TMP/err"))" $rc
check_json 4 < "$TMP/out4.json"
rc=$?
check "batch 4 JSON valid ($(cat "$TMP/out4.json"))" $rc

"$MCPCTL" perf "$DEMO/digits.onnx" --iterations=2 --backend ref --threads 1 > "$TMP/out.txt" 2> "$TMP/err"
check "plain-text report exits 0" $?
grep -q "^latency: median" "$TMP/out.txt" && grep -q "^peak RSS:" "$TMP/out.txt" && grep -q "^load:" "$TMP/out.txt"
check "plain-text report has load, latency and peak RSS lines" $?

# --profile: in JSON, "ops" sums the nodes per op type and backend and
# "nodes" lists every node (ms per run, non-negative, names unique); in text,
# an op-type table and the slowest nodes.
"$MCPCTL" perf "$DEMO/digits.onnx" --iterations 20 --profile --json > "$TMP/prof.json" 2> "$TMP/err"
rc=$?
check "perf --profile --json exits 0 ($(cat "$TMP/err"))" $rc
"$PY" -c '
import json, sys
obj = json.load(open(sys.argv[1]))
ops, nodes = obj["ops"], obj["nodes"]
assert nodes and ops, "empty profile"
names = [n["name"] for n in nodes]
assert len(set(names)) == len(names), "node names repeat"
for n in nodes:
    assert n["ms"] >= 0 and n["backend"] in ("ref", "dnnl"), n
assert [n["ms"] for n in nodes] == sorted((n["ms"] for n in nodes), reverse=True), "nodes not slowest first"
per_op = {}
for n in nodes:
    per_op[(n["op_type"], n["backend"])] = per_op.get((n["op_type"], n["backend"]), 0) + 1
assert {(o["op_type"], o["backend"]): o["nodes"] for o in ops} == per_op, "ops do not count the nodes"
total = sum(n["ms"] for n in nodes)
assert abs(sum(o["ms"] for o in ops) - total) <= 1e-6 + 1e-4 * total, "ops do not sum the nodes (printed to 6 digits)"
' "$TMP/prof.json"
rc=$?; check "profile JSON: ops count and sum the nodes ($(head -c 300 "$TMP/prof.json"))" $rc
"$MCPCTL" perf "$DEMO/digits.onnx" --iterations 5 --profile > "$TMP/prof.txt" 2> "$TMP/err"
check "perf --profile exits 0" $?
grep -q "^profile, per run" "$TMP/prof.txt" && grep -q "^slowest nodes:" "$TMP/prof.txt"
check "plain-text profile has the op table and the slowest nodes" $?

expect_error() { # description, pattern, command...
  local desc=$1 pattern=$2
  shift 2
  "$@" > "$TMP/stdout" 2> "$TMP/stderr"
  local rc=$?
  [ $rc -ne 0 ]; check "$desc: exit status non-zero" $?
  [ "$(wc -l < "$TMP/stderr")" -eq 1 ]; check "$desc: one line on stderr" $?
  grep -q -- "$pattern" "$TMP/stderr"
  local found=$?
  check "$desc: message mentions '$pattern' ($(cat "$TMP/stderr"))" $found
  [ ! -s "$TMP/stdout" ]; check "$desc: nothing on stdout" $?
}
expect_error "bad flag" "--bogus" "$MCPCTL" perf "$DEMO/digits.onnx" --bogus
expect_error "missing model" "cannot open" "$MCPCTL" perf "$TMP/nope.onnx" --json
expect_error "no model" "usage" "$MCPCTL" perf --json
expect_error "zero iterations" "--iterations" "$MCPCTL" perf "$DEMO/digits.onnx" --iterations 0
expect_error "non-numeric batch" "--batch" "$MCPCTL" perf "$DEMO/digits.onnx" --batch x
expect_error "missing value" "--warmup" "$MCPCTL" perf "$DEMO/digits.onnx" --warmup
expect_error "bad backend" "backend" "$MCPCTL" perf "$DEMO/digits.onnx" --backend nope
head -c 200 "$DEMO/digits.onnx" > "$TMP/truncated.onnx"
expect_error "truncated model" "not a valid ONNX model" "$MCPCTL" perf "$TMP/truncated.onnx"

# --no-graph-passes runs the graph as written: the demo's MatMul + Add + Relu
# stay three nodes instead of one FusedGemm.
"$MCPCTL" perf "$DEMO/digits.onnx" --iterations 2 --profile --json --no-graph-passes > "$TMP/raw.json" 2> "$TMP/err"
check "perf --no-graph-passes exits 0 ($(cat "$TMP/err"))" $?
"$PY" -c '
import json, sys
written = {o["op_type"] for o in json.load(open(sys.argv[1]))["ops"]}
fused = {o["op_type"] for o in json.load(open(sys.argv[2]))["ops"]}
assert "MatMul" in written and "FusedGemm" not in written, written
assert "FusedGemm" in fused, fused' "$TMP/raw.json" "$TMP/prof.json"
check "perf --no-graph-passes keeps the graph as written" $?

# --bf16 says which precision applied; a compiled model loads and reports
# no warning when asked for what it was compiled for, a warning otherwise.
"$MCPCTL" perf "$DEMO/digits.onnx" --iterations 2 --bf16 --json > "$TMP/bf16.json" 2> "$TMP/err"
rc=$?
check "perf --bf16 exits 0 ($(cat "$TMP/err"))" $rc
"$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["precision"] in ("bf16", "fp32")' "$TMP/bf16.json"
check "perf --bf16 --json says the precision ($(cat "$TMP/bf16.json"))" $?
"$MCPCTL" compile "$DEMO/digits.onnx" -o "$TMP/digits.mcpir" --threads 1 > "$TMP/stdout" 2> "$TMP/err"
rc=$?
check "compile exits 0 ($(cat "$TMP/err"))" $rc
"$MCPCTL" perf "$TMP/digits.mcpir" --threads 1 --iterations 2 --json > "$TMP/ir.json" 2> "$TMP/err"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$TMP/err" ]; check "perf of the compiled model at its threads: no warning ($(cat "$TMP/err"))" $?
check_json 1 < "$TMP/ir.json"; check "compiled model: perf JSON ($(cat "$TMP/ir.json"))" $?
"$MCPCTL" perf "$TMP/digits.mcpir" --threads 2 --iterations 2 --json > "$TMP/ir2.json" 2> "$TMP/err"
rc=$?
[ $rc -eq 0 ] && grep -q "warning: compiled for .*threads 1.*recompiled" "$TMP/err"
check "perf of the compiled model at other threads warns ($(cat "$TMP/err"))" $?
"$MCPCTL" run "$TMP/digits.mcpir" "$TMP/out-ir" input="$DEMO/sample_0.npy" > /dev/null 2>&1 &&
  "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/out-onnx" input="$DEMO/sample_0.npy" > /dev/null 2>&1 &&
  cmp -s "$TMP/out-ir/probabilities.npy" "$TMP/out-onnx/probabilities.npy"
check "run of the compiled model gives the ONNX model's bytes" $?
expect_error "compile without -o" "usage" "$MCPCTL" compile "$DEMO/digits.onnx"
expect_error "compile of a compiled model" "compiled already" "$MCPCTL" compile "$TMP/digits.mcpir" -o "$TMP/again.mcpir"
expect_error "compile of a missing model" "nope.onnx" "$MCPCTL" compile "$TMP/nope.onnx" -o "$TMP/x.mcpir"
expect_error "compile with bad threads" "--threads" "$MCPCTL" compile "$DEMO/digits.onnx" -o "$TMP/x.mcpir" --threads 0
expect_error "compile into a missing folder" "cannot create" "$MCPCTL" compile "$DEMO/digits.onnx" -o "$TMP/no/dir/x.mcpir"
head -c 600 "$TMP/digits.mcpir" > "$TMP/cut.mcpir"
expect_error "truncated compiled model" "outside the" "$MCPCTL" perf "$TMP/cut.mcpir"

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
