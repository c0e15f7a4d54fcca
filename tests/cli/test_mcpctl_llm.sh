#!/usr/bin/env bash
# mcpctl generate / inspect / perf on GGUF models end to end: greedy output
# is deterministic and the same as --json's text, a seed repeats a sampled
# run, stop strings cut the text, --max-tokens bounds it; bad arguments and
# bad files exit non-zero naming the problem.
#   test_mcpctl_llm.sh MCPCTL MODELS_DIR (tools/make_llm_test_models.py) DEMO_DIR
set -u
MCPCTL=$1
MODELS=$2
DEMO=$3
M=$MODELS/llama-Q8_0.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { # description, condition result
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi
}

"$MCPCTL" inspect "$M" > "$TMP/inspect" 2>&1
check "inspect exits 0" $?
grep -q "^architecture: llama" "$TMP/inspect"; check "inspect names the architecture" $?
grep -q "Q8_0 " "$TMP/inspect"; check "inspect lists the tensor types" $?
grep -q "tokenizer: llama (SentencePiece), 32000 tokens" "$TMP/inspect"; check "inspect names the tokenizer" $?
grep -q "attention: 4 heads, 2 KV heads, head size 16" "$TMP/inspect"; check "inspect gives the attention shape" $?

"$MCPCTL" generate "$M" --prompt "Once upon a time" --max-tokens 12 --greedy > "$TMP/g1" 2> "$TMP/e1"
check "generate exits 0" $?
"$MCPCTL" generate "$M" --prompt "Once upon a time" --max-tokens 12 --greedy > "$TMP/g2" 2>/dev/null
cmp -s "$TMP/g1" "$TMP/g2"; check "greedy generation is deterministic" $?
[ "$(wc -c < "$TMP/g1")" -gt 3 ]; check "generate printed text" $?
grep -q "12 generated" "$TMP/e1"; check "generate reports 12 generated tokens ($(cat "$TMP/e1"))" $?
"$MCPCTL" generate "$M" --prompt "Once upon a time" --max-tokens 12 --greedy --json > "$TMP/j1" 2>/dev/null
/usr/bin/python3 - "$TMP/j1" "$TMP/g1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2], encoding="utf-8").read()
assert j["text"] + "\n" == text, (j["text"], text)
assert j["completion_tokens"] == 12 and j["finish_reason"] == "length" and j["prompt_tokens"] >= 4, j
PY
check "--json gives the same text and the counts" $?

# A stop string taken from the greedy text cuts the output right before it.
stop=$(/usr/bin/python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['text']; print(t[len(t)//2:len(t)//2+3])" "$TMP/j1")
"$MCPCTL" generate "$M" --prompt "Once upon a time" --max-tokens 12 --greedy --json --stop "$stop" > "$TMP/j2" 2>/dev/null
/usr/bin/python3 - "$TMP/j1" "$TMP/j2" "$stop" <<'PY'
import json, sys
full = json.load(open(sys.argv[1]))["text"]
cut = json.load(open(sys.argv[2]))
stop = sys.argv[3]
assert cut["finish_reason"] == "stop", cut
assert cut["text"] == full[:full.index(stop)], (cut["text"], full, stop)
PY
check "a stop string ends the text before it" $?

"$MCPCTL" generate "$M" --prompt "Hello" --max-tokens 16 --seed 5 --temperature 1 --json > "$TMP/s1" 2>/dev/null
"$MCPCTL" generate "$M" --prompt "Hello" --max-tokens 16 --seed 5 --temperature 1 --json > "$TMP/s2" 2>/dev/null
/usr/bin/python3 -c "import json,sys; a,b=(json.load(open(p))['text'] for p in sys.argv[1:]); assert a==b" "$TMP/s1" "$TMP/s2"
check "the same seed gives the same sampled text" $?

"$MCPCTL" perf "$M" --prompt-tokens 32 --gen-tokens 8 --repeat 1 --json > "$TMP/p" 2>&1
/usr/bin/python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
assert d['prefill_tokens_per_s'] > 0 and d['decode_tokens_per_s'] > 0 and d['prompt_tokens'] == 32, d
assert d['decode_bytes'] <= d['weight_bytes'], d" "$TMP/p"
check "perf --json reports prefill and decode" $?

# The demo model writes English: common words, printable text, an end.
"$MCPCTL" generate "$DEMO/fortunes.gguf" --prompt "The secret of life is" --max-tokens 60 --greedy --json > "$TMP/d" 2>/dev/null
/usr/bin/python3 - "$TMP/d" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
t = d["text"]
words = re.findall(r"[a-z']+", t.lower())
common = {"the", "a", "to", "of", "and", "is", "be", "in", "it", "that", "you", "not", "best", "thing", "done"}
assert len(words) >= 4 and sum(w in common for w in words) >= 3, t
assert all(c.isprintable() or c in "\n\t" for c in t), repr(t)
assert d["completion_tokens"] >= 4, d
PY
check "the demo model writes English ($(head -c 120 "$TMP/d"))" $?

expect_error() { # description, pattern, command...
  local desc=$1 pattern=$2
  shift 2
  "$@" > "$TMP/stdout" 2> "$TMP/stderr"
  local rc=$?
  [ $rc -ne 0 ] && grep -q -- "$pattern" "$TMP/stderr"
  check "$desc (exit $rc: $(head -c 200 "$TMP/stderr"))" $?
}
expect_error "generate without a prompt" "usage: mcpctl generate" "$MCPCTL" generate "$M"
expect_error "a temperature out of range" "--temperature needs a number from 0 to 100" \
  "$MCPCTL" generate "$M" --prompt x --temperature 500
expect_error "a non-numeric max-tokens" "--max-tokens needs a number" "$MCPCTL" generate "$M" --prompt x --max-tokens lots
expect_error "a missing model file" "/nonexistent.gguf" "$MCPCTL" generate /nonexistent.gguf --prompt x
printf 'GGUF\003\000\000\000' > "$TMP/short.gguf"
expect_error "a truncated GGUF" "GGUF: truncated" "$MCPCTL" generate "$TMP/short.gguf" --prompt x
expect_error "perf past the context" "exceed the model's context" "$MCPCTL" perf "$M" --prompt-tokens 4096
expect_error "an empty stop string" "--stop needs a non-empty string" "$MCPCTL" generate "$M" --prompt x --stop ""

[ $fails -eq 0 ] && echo "mcpctl llm: all passed" || echo "mcpctl llm: $fails failed"
exit $((fails > 0))
