#!/usr/bin/env bash
# mcpctl's server commands end to end against a real mcp2026-server on
# 127.0.0.1 (any free port): apply, get models, describe, infer (outputs
# byte-identical to `mcpctl run`), delete, validate, bench; plus error paths,
# each of which must exit non-zero with one line on stderr naming the problem.
#
#   test_mcpctl_server.sh MCPCTL MCP2026_SERVER MODELS_DEMO_DIR
set -u
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
MCPCTL=$(abspath "$1")
SERVER_BIN=$(abspath "$2")
DEMO=$(abspath "$3")
TMP=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
fails=0
check() { # description, status (0 = pass)
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi
}
expect_error() { # description, pattern, command...
  local desc=$1 pattern=$2
  shift 2
  "$@" > "$TMP/stdout" 2> "$TMP/stderr"
  local rc=$?
  [ $rc -ne 0 ]; check "$desc: exit status non-zero" $?
  [ "$(wc -l < "$TMP/stderr")" -eq 1 ]; check "$desc: one line on stderr" $?
  grep -qE -- "$pattern" "$TMP/stderr"
  rc=$?; check "$desc: message matches '$pattern' ($(head -c 300 "$TMP/stderr"))" $rc
}

# ---- start the server on a free port (it picks one with --port 0) ----
"$SERVER_BIN" --model-path "$DEMO/digits.onnx" --model-root "$DEMO" --model-root "$TMP" --host 127.0.0.1 --port 0 --grpc-port 0 > "$TMP/server.log" 2>&1 &
SERVER_PID=$!
URL=
for _ in $(seq 100); do
  URL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$TMP/server.log" | head -1)
  [ -n "$URL" ] && "$MCPCTL" get models --server "$URL" > /dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$URL" ] || ! "$MCPCTL" get models --server "$URL" > /dev/null 2>&1; then
  echo "FAIL: server did not start:"; cat "$TMP/server.log"; exit 1
fi
echo "server at $URL"
export MCP_SERVER=$URL # every command below finds it through the environment

# ---- validate (local) ----
cat > "$TMP/model.yaml" <<EOF
name: digits-apply
version: v1.2.3
format: onnx
path: $DEMO/digits.onnx
device: cpu
batch_size: 16
precision: fp32
EOF
cat > "$TMP/bad.yaml" <<'EOF'
name: digits-bad
version: 1.2
format: tflite
path: ./nowhere.onnx
batching:
  max_queue_delay_us: -5
preprocess:
  - python: "import os"
EOF
env -u MCP_SERVER "$MCPCTL" validate -f "$TMP/model.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
check "validate valid descriptor exits 0" $?
grep -qx "$TMP/model.yaml: valid" "$TMP/stdout"; check "validate prints 'FILE: valid'" $?
"$MCPCTL" validate -f "$TMP/bad.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -eq 1 ]; check "validate invalid descriptor exits 1" $?
grep -qE "bad\.yaml:2:[0-9]+: version: " "$TMP/stderr"; check "validate names version at line 2 with a column" $?
grep -qE "bad\.yaml:3:[0-9]+: format: " "$TMP/stderr"; check "validate names format at line 3" $?
grep -qE "bad\.yaml:6:[0-9]+: batching\.max_queue_delay_us: " "$TMP/stderr"; check "validate names batching.max_queue_delay_us at line 6" $?
grep -qE "bad\.yaml:8:[0-9]+: preprocess\[0\]\.python: .*user code" "$TMP/stderr"; check "validate rejects code in preprocess at line 8" $?
[ "$(grep -cE 'bad\.yaml:[0-9]+:[0-9]+: ' "$TMP/stderr")" -ge 4 ]; check "validate reports every problem at once" $?
mkdir -p "$TMP/triton/digits/1" && cp "$DEMO/digits.onnx" "$TMP/triton/digits/1/model.onnx"
cat > "$TMP/triton/digits/config.pbtxt" <<'EOF'
name: "digits"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "input" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "label" data_type: TYPE_INT64 dims: [ ] } ]
EOF
"$MCPCTL" validate -f "$TMP/triton/digits" > "$TMP/stdout" 2> "$TMP/stderr"
rc=$?; check "validate Triton model folder exits 0 ($(cat "$TMP/stderr"))" $rc
grep -qx "$TMP/triton/digits: valid" "$TMP/stdout"; check "validate Triton model folder prints 'FOLDER: valid'" $?
sed -i 's/TYPE_FP32/TYPE_FP99/' "$TMP/triton/digits/config.pbtxt"
"$MCPCTL" validate -f "$TMP/triton/digits" > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -eq 1 ] && grep -qE "digits/config\.pbtxt:4:[0-9]+: input\[0\]\.data_type: .*TYPE_FP99" "$TMP/stderr"
check "validate bad Triton config names config.pbtxt:line:col and the field" $?
"$MCPCTL" validate -f "$TMP/nope.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -eq 1 ] && grep -q "nope\.yaml: cannot open" "$TMP/stderr"; check "validate of a missing file exits 1 and says so" $?
# A descriptor the engine cannot load fails validate and apply alike, naming
# the field and line: a missing model file, a precision not implemented yet.
printf 'name: digits-missing\npath: %s/no-such-model.onnx\n' "$TMP" > "$TMP/missing.yaml"
"$MCPCTL" validate -f "$TMP/missing.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -eq 1 ] && grep -qE "missing\.yaml:2:[0-9]+: path: model file '.*no-such-model\.onnx' cannot be read" "$TMP/stderr"
rc=$?; check "validate reports a missing model file at its line ($(head -c 300 "$TMP/stderr"))" $rc
printf 'name: digits-fp16\npath: %s/digits.onnx\nprecision: fp16\n' "$DEMO" > "$TMP/fp16.yaml"
"$MCPCTL" validate -f "$TMP/fp16.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -eq 1 ] && grep -qE "fp16\.yaml:3:[0-9]+: precision: precision 'fp16' is not implemented" "$TMP/stderr"
rc=$?; check "validate refuses a precision the engine does not run ($(head -c 300 "$TMP/stderr"))" $rc
for f in missing fp16; do
  python3 - "$URL" "$f" "$TMP/$f.yaml" > "$TMP/resp" <<'PY'
import json, sys, requests
url, name, path = sys.argv[1:4]
r = requests.post(f"{url}/v2/repository/models/digits-{name}/load",
                  json={"parameters": {"config": open(path).read()}}, timeout=60)
print(r.status_code, r.text)
PY
  grep -q "^400 " "$TMP/resp"; rc=$?; check "load of the $f descriptor is a 400, not a 500 ($(head -c 300 "$TMP/resp"))" $rc
  want="no-such-model\.onnx"; [ "$f" = fp16 ] && want="precision 'fp16'"
  grep -q "$want" "$TMP/resp"; check "the load of the $f descriptor names the problem" $?
done

# A load that takes more than a second says how it goes.
SRC=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$SRC/tools/make_e2e_models.py" "$TMP/gen" > /dev/null
cat > "$TMP/slow.yaml" <<EOF
name: slow-apply
path: $TMP/gen/slow.onnx
max_batch_size: 0
warmup: 8
inputs:
  - name: x
    shape: [1, 160, 256]
EOF
"$MCPCTL" apply -f "$TMP/slow.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
rc=$?; check "apply of a slow model exits 0 ($(head -c 300 "$TMP/stderr"))" $rc
grep -qE "^mcpctl: apply: model slow-apply loading: (warm-up|importing and preparing), [0-9.]+ s$" "$TMP/stderr"
rc=$?; check "apply prints the load's phase and time while it lasts ($(head -c 300 "$TMP/stderr"))" $rc
grep -q "model slow-apply .* ready at" "$TMP/stdout"; check "the slow apply ends ready" $?

# ---- apply / get / describe ----
"$MCPCTL" apply -f "$TMP/model.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
rc=$?; check "apply exits 0 ($(cat "$TMP/stderr"))" $rc
grep -qx "model digits-apply v1.2.3 ready at $URL/v2/models/digits-apply/infer" "$TMP/stdout"
rc=$?; check "apply prints the endpoint ($(cat "$TMP/stdout"))" $rc
"$MCPCTL" apply -f "$TMP/bad.yaml" > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -eq 1 ]; check "apply of an invalid descriptor exits 1" $?
grep -q "nothing sent" "$TMP/stderr" && grep -qE "bad\.yaml:2:[0-9]+: version" "$TMP/stderr"
check "apply of an invalid descriptor lists the problems and sends nothing" $?

"$MCPCTL" get models > "$TMP/stdout" 2> "$TMP/stderr"
check "get models exits 0" $?
grep -qE "^NAME +VERSION +STATE +REASON" "$TMP/stdout"; check "get models prints a header" $?
grep -qE "^digits-apply +v1\.2\.3 +READY" "$TMP/stdout"; check "get models lists digits-apply READY" $?
grep -qE "^digits +v[0-9.]+ +READY" "$TMP/stdout"; check "get models lists digits READY" $?

"$MCPCTL" describe model digits-apply > "$TMP/stdout" 2> "$TMP/stderr"
check "describe exits 0" $?
grep -qE "^state: READY" "$TMP/stdout"; check "describe shows the state" $?
grep -qE "^version: v1\.2\.3" "$TMP/stdout"; check "describe shows the version" $?
grep -qE "^ +input input: FP32 \[-1, 64\]" "$TMP/stdout"; check "describe shows the input" $?
grep -qE "^ +output label: INT64 \[-1\]" "$TMP/stdout"; check "describe shows the label output" $?
expect_error "describe unknown model" "HTTP 404" "$MCPCTL" describe model nope

# ---- infer: identical to mcpctl run ----
while read -r file truth _pred; do
  case "$file" in \#*) continue ;; esac
  "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/run_$file" "input=$DEMO/$file" > "$TMP/run.out" 2>&1
  check "run $file exits 0" $?
  "$MCPCTL" infer digits-apply "input=$DEMO/$file" --out "$TMP/inf_$file" > "$TMP/inf.out" 2> "$TMP/stderr"
  rc=$?; check "infer $file exits 0 ($(cat "$TMP/stderr"))" $rc
  cmp -s "$TMP/run_$file/probabilities.npy" "$TMP/inf_$file/probabilities.npy"
  check "infer $file: probabilities.npy identical to mcpctl run" $?
  cmp -s "$TMP/run_$file/label.npy" "$TMP/inf_$file/label.npy"; check "infer $file: label.npy identical to mcpctl run" $?
  sed "s#$TMP/run_$file#OUT#" "$TMP/run.out" > "$TMP/a"
  sed "s#$TMP/inf_$file#OUT#" "$TMP/inf.out" > "$TMP/b"
  cmp -s "$TMP/a" "$TMP/b"; check "infer $file prints the same summary lines as run" $?
  grep -qx "label: int64 \[1\] -> OUT/label.npy {$truth}" "$TMP/b"; check "infer $file predicts $truth" $?
done < "$DEMO/samples.txt"
# Without --out nothing lands in the current folder: a new folder under
# $TMPDIR holds the outputs, and the summary lines name it.
mkdir -p "$TMP/cwd" "$TMP/tmpdir"
(cd "$TMP/cwd" && TMPDIR="$TMP/tmpdir" "$MCPCTL" infer digits "input=$DEMO/sample_0.npy" > "$TMP/noout.out" 2>&1)
rc=$?; check "infer without --out exits 0 ($(head -c 300 "$TMP/noout.out"))" $rc
[ -z "$(ls -A "$TMP/cwd")" ]; check "infer without --out writes nothing into the current folder" $?
made=$(ls -d "$TMP"/tmpdir/mcpctl-infer-digits-* 2>/dev/null | head -1)
[ -n "$made" ] && [ -s "$made/label.npy" ] && grep -q "$made/label.npy" "$TMP/noout.out"
rc=$?; check "infer without --out names the folder it made ($(head -c 300 "$TMP/noout.out"))" $rc
# Global flags before the command, as kubectl users type them.
"$MCPCTL" --server "$URL" get models > "$TMP/stdout" 2> "$TMP/stderr"
rc=$?; check "mcpctl --server URL get models exits 0 ($(cat "$TMP/stderr"))" $rc
grep -qE "^digits +" "$TMP/stdout"; check "mcpctl --server URL get models lists digits" $?
"$MCPCTL" --server=http://127.0.0.1:1 get models > "$TMP/stdout" 2> "$TMP/stderr"
[ $? -ne 0 ] && grep -q "127.0.0.1:1" "$TMP/stderr"; check "a leading --server=URL is the one used" $?

/usr/bin/python3 -c "import numpy as n; n.save('$TMP/short.npy', n.zeros((1,63), dtype=n.float32)); n.save('$TMP/i64.npy', n.zeros((1,64), dtype=n.int64))"
expect_error "infer unknown model" "infer nope: .*HTTP 404" "$MCPCTL" infer nope "input=$DEMO/sample_0.npy"
expect_error "infer wrong shape" "HTTP 400: .*input 'input'.*\[1,63\]" "$MCPCTL" infer digits "input=$TMP/short.npy" --out "$TMP/o"
expect_error "infer wrong dtype" "HTTP 400: .*input 'input'.*INT64" "$MCPCTL" infer digits "input=$TMP/i64.npy" --out "$TMP/o"
expect_error "infer unknown input name" "no input named 'pixels'" "$MCPCTL" infer digits "pixels=$DEMO/sample_0.npy"
expect_error "infer missing input" "missing input 'input'" "$MCPCTL" infer digits
expect_error "infer not a .npy" "input 'input'.*bad magic" "$MCPCTL" infer digits "input=$DEMO/samples.txt"
expect_error "infer bad argument" "usage" "$MCPCTL" infer
expect_error "unreachable server" "cannot reach http://127\.0\.0\.1:1/" "$MCPCTL" get models --server http://127.0.0.1:1

# ---- bench ----
"$MCPCTL" bench digits --concurrency 1,2 --duration 1s > "$TMP/bench.txt" 2> "$TMP/stderr"
rc=$?; check "bench exits 0 ($(cat "$TMP/stderr"))" $rc
grep -qE "^ +1 +[1-9][0-9]* +[0-9.]+ " "$TMP/bench.txt"; check "bench prints a row for concurrency 1" $?
grep -qE "^ +2 +[1-9][0-9]* +[0-9.]+ " "$TMP/bench.txt"; check "bench prints a row for concurrency 2" $?
"$MCPCTL" bench digits --concurrency 1,2 --duration 1s --json > "$TMP/bench.json" 2> "$TMP/stderr"
check "bench --json exits 0" $?
/usr/bin/python3 - "$TMP/bench.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
levels = r["levels"]
assert r["model"] == "digits" and r["protocol"] == "v2", r
assert [l["concurrency"] for l in levels] == [1, 2], levels
for l in levels:
    assert l["requests"] > 0 and l["errors"] == 0, l
    assert 0 < l["p50_us"] <= l["p90_us"] <= l["p99_us"], l
    s = l["server"]
    assert s["metrics"] is True, s
    assert s["compute_us"] > 0 and s["total_us"] >= s["compute_us"] and s["queue_us"] >= 0, s
    assert abs(s["overhead_us"] - (s["total_us"] - s["compute_us"])) < 0.01, s
    assert s["avg_batch"] >= 1, s
EOF
check "bench --json: two levels, requests, no errors, server split from /metrics" $?
"$MCPCTL" bench digits --concurrency 1 --duration 500ms --protocol v1 --json > "$TMP/bench1.json" 2> "$TMP/stderr"
rc=$?; check "bench --protocol v1 exits 0 ($(cat "$TMP/stderr"))" $rc
/usr/bin/python3 -c "import json,sys; l=json.load(open('$TMP/bench1.json'))['levels'][0]; sys.exit(not (l['requests'] > 0 and l['errors'] == 0))"
check "bench v1: requests and no errors" $?
"$MCPCTL" bench digits --concurrency 1 --duration 500ms --input "input=$DEMO/sample_1.npy" > /dev/null 2> "$TMP/stderr"
check "bench --input exits 0" $?
# Open loop: 2 clients start at most 40 requests in 1 s together (the
# schedule bounds the count whatever the machine's speed), never none.
"$MCPCTL" bench digits --concurrency 2 --duration 1s --rate 40 --json > "$TMP/bench-rate.json" 2> "$TMP/stderr"
rc=$?; check "bench --rate exits 0 ($(cat "$TMP/stderr"))" $rc
/usr/bin/python3 -c "import json,sys; j=json.load(open('$TMP/bench-rate.json')); l=j['levels'][0]; sys.exit(not (j['rate'] == 40 and 0 < l['requests'] <= 40 and l['errors'] == 0))"
check "bench --rate 40: at most 40 requests in 1 s, none failed" $?
expect_error "bench --rate not a number" "--rate" "$MCPCTL" bench digits --rate fast
expect_error "bench --rate zero" "--rate" "$MCPCTL" bench digits --rate 0
expect_error "bench --rate with unary grpc" "closed loops" "$MCPCTL" bench digits --rate 10 --protocol grpc
expect_error "bench duration over 600 s" "duration" "$MCPCTL" bench digits --duration 601s
expect_error "bench bad concurrency" "concurrency" "$MCPCTL" bench digits --concurrency 1,x
expect_error "bench unknown model" "HTTP 404" "$MCPCTL" bench nope --duration 1s

# ---- delete ----
"$MCPCTL" delete model digits-apply > "$TMP/stdout" 2> "$TMP/stderr"
rc=$?; check "delete exits 0 ($(cat "$TMP/stderr"))" $rc
grep -qx "model digits-apply unloaded" "$TMP/stdout"; check "delete says so" $?
"$MCPCTL" get models > "$TMP/stdout" 2>&1
! grep -qE "^digits-apply +v1\.2\.3 +READY" "$TMP/stdout"; check "deleted model is no longer READY" $?
expect_error "infer deleted model" "infer digits-apply: .*HTTP (404|503)" "$MCPCTL" infer digits-apply "input=$DEMO/sample_0.npy"
expect_error "delete unknown model" "HTTP 404" "$MCPCTL" delete model nope

kill -0 "$SERVER_PID" 2>/dev/null; check "server still running after every error path" $?
if [ "$fails" -ne 0 ]; then echo "--- server log (last 40 lines):"; tail -n 40 "$TMP/server.log"; fi
echo "$fails failures"
[ "$fails" -eq 0 ]
