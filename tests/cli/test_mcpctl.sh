#!/usr/bin/env bash
# mcpctl run / inspect end to end on the demo model, plus error paths: each
# must exit non-zero with exactly one line on stderr naming the problem.
set -u
MCPCTL=$1
DEMO=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { # description, condition result
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi
}

# Every sample: the label output equals the true digit in samples.txt.
while read -r file truth _pred; do
  case "$file" in \#*) continue ;; esac
  out="$TMP/out_$file"
  "$MCPCTL" run "$DEMO/digits.onnx" "$out" "input=$DEMO/$file" > "$TMP/stdout" 2> "$TMP/stderr"
  check "run $file exits 0" $?
  label=$(sed -n 's/^label: .*{\([0-9-]*\)}$/\1/p' "$TMP/stdout")
  [ "$label" = "$truth" ]; check "$file predicted $label, true digit $truth" $?
  [ -s "$out/probabilities.npy" ] && [ -s "$out/label.npy" ]; check "$file outputs written" $?
  # .npy header names the right dtype and shape.
  head -c 128 "$out/label.npy" | grep -q "'descr': '<i8'.*'shape': (1,)"; check "$file label.npy is int64 (1,)" $?
done < "$DEMO/samples.txt"

expect_error() { # description, pattern, command...
  local desc=$1 pattern=$2
  shift 2
  "$@" > "$TMP/stdout" 2> "$TMP/stderr"
  local rc=$?
  [ $rc -ne 0 ]; check "$desc: exit status non-zero" $?
  [ "$(wc -l < "$TMP/stderr")" -eq 1 ]; check "$desc: one line on stderr" $?
  grep -q "$pattern" "$TMP/stderr"
  local found=$?
  check "$desc: message mentions '$pattern' ($(cat "$TMP/stderr"))" $found
}
head -c 200 "$DEMO/digits.onnx" > "$TMP/truncated.onnx"
expect_error "truncated model" "not a valid ONNX model" "$MCPCTL" run "$TMP/truncated.onnx" "$TMP/o" "input=$DEMO/sample_0.npy"
expect_error "missing model" "cannot open" "$MCPCTL" run "$TMP/nope.onnx" "$TMP/o"
expect_error "unknown input name" "no input named 'pixels'" "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/o" "pixels=$DEMO/sample_0.npy"
expect_error "missing input" "missing input 'input'" "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/o"
expect_error "not a .npy" "bad magic" "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/o" "input=$DEMO/samples.txt"
/usr/bin/python3 -c "import numpy as n; n.save('$TMP/i64.npy', n.zeros((1,64), dtype=n.int64)); n.save('$TMP/short.npy', n.zeros((1,63), dtype=n.float32))"
expect_error "wrong dtype" "input 'input' has dtype int64, the model expects float32" "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/o" "input=$TMP/i64.npy"
expect_error "wrong shape" "input 'input' has shape \[1,63\]" "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/o" "input=$TMP/short.npy"
expect_error "bad argument" "not NAME=FILE" "$MCPCTL" run "$DEMO/digits.onnx" "$TMP/o" "input"

"$MCPCTL" inspect "$DEMO/digits.onnx" > "$TMP/inspect"
check "inspect exits 0" $?
grep -q "input input: float32 \[batch, 64\]" "$TMP/inspect"; check "inspect shows the symbolic input shape" $?
grep -q "ai.onnx 13" "$TMP/inspect"; check "inspect shows the opset" $?
grep -qE "^ +2 +Add$" "$TMP/inspect"; check "inspect histogram counts 2 Add" $?

echo "$fails failures"
[ "$fails" -eq 0 ]
