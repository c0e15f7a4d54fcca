#!/usr/bin/env bash
# mcpctl's model store commands on real folders: two versions of the demo
# model stored (the model file once), listed, compared (a labels file added,
# the output's datatype and shape changed), verified, pushed to another OCI
# layout and pulled into a third store with the same manifest digest; a
# damaged blob makes verify fail naming it; rm then gc removes only the
# forgotten version's blobs; bad references, a model that does not load and
# a hostile index.json are refused with a message and nothing stored.
set -u
MCPCTL=$1
DEMO=$2
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
fails=0
check() { # description, condition result
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi
}
json_get() { # file, python expression over `d`
  "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

cd "$TMP" || exit 1
cp "$DEMO/digits.onnx" .
seq 0 9 | sed 's/^/digit /' > labels.txt
printf 'name: digits\nversion: v1.0.0\nformat: onnx\npath: digits.onnx\n' > v1.yaml
printf 'name: digits\nversion: v1.1.0\nformat: onnx\npath: digits.onnx\npostprocess:\n  - topk: {tensor: probabilities, k: 3, labels: labels.txt}\n' > v2.yaml
export MCP_STORE="$TMP/store"

"$MCPCTL" store add v1.yaml > out 2> err
rc=$?
check "store add v1 ($(cat err))" $rc
grep -q "stored digits@v1.0.0 sha256:" out
check "store add prints the version and its manifest digest ($(cat out))" $?
"$MCPCTL" store add v2.yaml --json > add2.json 2> err
rc=$?
check "store add v2 --json ($(cat err))" $rc
[ "$(json_get add2.json 'len(d["files"])')" = 2 ] && [ "$(json_get add2.json 'd["files"][1]["title"]')" = labels.txt ]
check "v2 holds the model and its labels file ($(cat add2.json))" $?
# 2 descriptors, 2 manifests, the model once, the labels once.
n=$(ls store/blobs/sha256 | wc -l)
[ "$n" = 6 ]
check "the same model file is stored once (6 blobs, got $n)" $?
[ -f store/oci-layout ] && [ -f store/index.json ] && grep -q '"imageLayoutVersion":"1.0.0"' store/oci-layout
check "the store is an OCI image layout" $?

"$MCPCTL" store ls > ls.txt
rc=$?
check "store ls" $rc
[ "$(wc -l < ls.txt)" = 2 ] && grep -q "^digits@v1.1.0	sha256:" ls.txt
check "store ls lists both versions ($(cat ls.txt))" $?

"$MCPCTL" diff digits@v1.0.0 digits@v1.1.0 --json > diff.json 2> err
rc=$?
check "diff --json ($(cat err))" $rc
[ "$(json_get diff.json '[f["change"] for f in d["files"]]')" = "['same', 'added']" ]
check "diff: the model file is the same, the labels file added" $?
[ "$(json_get diff.json '[(c["name"], c["change"], c["to"]) for c in d["io"]]')" = "[('probabilities', 'changed', '[\"string\",[-1,3]]')]" ]
check "diff: the output's datatype and shape changed ($(json_get diff.json 'd["io"]'))" $?
[ "$(json_get diff.json 'd["topology"]')" = "changed" ]
check "diff: the topology fingerprint changed with the output" $?
"$MCPCTL" diff digits@v1.0.0 digits@v1.0.0 --json > same.json 2> err
[ "$(json_get same.json 'd["topology"]')" = "same" ]
check "diff of a version with itself: the same topology" $?
"$MCPCTL" diff digits@v1.0.0 digits@v1.1.0 > diff.txt
grep -q "^added    labels.txt sha256:" diff.txt && grep -q "outputs changed probabilities" diff.txt &&
  grep -q "^topology changed sha256:[0-9a-f]* -> sha256:" diff.txt
check "diff in text ($(tr '\n' '|' < diff.txt))" $?

"$MCPCTL" store verify > verify.txt
rc=$?
check "store verify passes ($(cat verify.txt))" $rc
grep -q "2 versions, 6 blobs (0 unreferenced), 0 problems" verify.txt
check "verify counts versions and blobs" $?

"$MCPCTL" push digits@v1.1.0 "$TMP/exchange" > push.txt 2> err
rc=$?
check "push to another OCI layout ($(cat err))" $rc
"$MCPCTL" pull "$TMP/exchange" digits@v1.1.0 --store "$TMP/third" --json > pull.json 2> err
rc=$?
check "pull into a third store ($(cat err))" $rc
[ "$(json_get pull.json 'd["manifest"]')" = "$(json_get add2.json 'd["manifest"]')" ]
check "the pulled version has the same manifest digest" $?
"$MCPCTL" store verify --store "$TMP/third" > /dev/null
check "the third store verifies" $?

# Damage: one byte of the model blob changed.
model=$(json_get add2.json 'd["files"][0]["digest"]' | sed 's/^sha256://')
chmod u+w "store/blobs/sha256/$model"
printf 'X' | dd of="store/blobs/sha256/$model" bs=1 seek=100 conv=notrunc 2> /dev/null
"$MCPCTL" store verify > verify.txt
rc=$?
[ $rc -ne 0 ] && grep -q "do not match" verify.txt
check "a damaged blob fails verify, named ($(cat verify.txt))" $?
"$MCPCTL" push digits@v1.0.0 "$TMP/exchange2" > /dev/null 2> err
rc=$?
[ $rc -ne 0 ] && grep -q "do not match its name" err
check "push refuses a damaged blob ($(cat err))" $?
"$MCPCTL" store gc --json > gc.json 2> err
rc=$?
[ $rc -eq 0 ] && [ "$(json_get gc.json 'd["removed"]')" = 0 ] && [ -f "store/blobs/sha256/$model" ]
check "gc keeps a damaged blob a version references (rc $rc, $(cat gc.json err))" $?
# A damaged manifest hides what its version uses: gc refuses to guess.
manifest=$(json_get add2.json 'd["manifest"]' | sed 's/^sha256://')
chmod u+w "store/blobs/sha256/$manifest"
cp "store/blobs/sha256/$manifest" manifest.bak
printf 'X' | dd of="store/blobs/sha256/$manifest" bs=1 seek=5 conv=notrunc 2> /dev/null
"$MCPCTL" store gc > /dev/null 2> err
rc=$?
[ $rc -ne 0 ] && grep -q "not collecting" err
check "gc refuses to run while a manifest is damaged ($(cat err))" $?
cp manifest.bak "store/blobs/sha256/$manifest"
cp digits.onnx "store/blobs/sha256/$model"
"$MCPCTL" store verify > /dev/null
check "repaired, the store verifies again" $?

"$MCPCTL" store rm digits@v1.1.0 > /dev/null
check "store rm" $?
"$MCPCTL" store gc --json > gc.json
rc=$?
check "store gc" $rc
[ "$(json_get gc.json 'd["removed"]')" = 3 ]
check "gc removed the labels, descriptor and manifest of v1.1.0 only ($(cat gc.json))" $?
"$MCPCTL" diff digits@v1.0.0 digits@v1.1.0 > /dev/null 2> err
rc=$?
[ $rc -ne 0 ] && grep -q "no version named digits:v1.1.0" err
check "diff with a forgotten version says so ($(cat err))" $?

# Refusals.
"$MCPCTL" diff ../x@1 digits@v1.0.0 > /dev/null 2> err
rc=$?
[ $rc -ne 0 ] && grep -q "NAME@VERSION" err
check "a bad reference is refused ($(cat err))" $?
printf 'not onnx' > broken.onnx
printf 'name: broken\nversion: v1.0.0\nformat: onnx\npath: broken.onnx\n' > broken.yaml
"$MCPCTL" store add broken.yaml > /dev/null 2> err
rc=$?
[ $rc -ne 0 ] && ! "$MCPCTL" store ls | grep -q broken
check "a model that does not load is not stored ($(head -c 200 err))" $?
mkdir -p hostile/blobs/sha256
printf '{"imageLayoutVersion":"1.0.0"}' > hostile/oci-layout
printf '{"schemaVersion":2,"manifests":[{"mediaType":"x","digest":"sha256:../../../etc/passwd","size":1,"annotations":{"org.opencontainers.image.ref.name":"digits:v9"}}]}' > hostile/index.json
"$MCPCTL" pull "$TMP/hostile" digits@v9 > /dev/null 2> err
rc=$?
[ $rc -ne 0 ] && grep -q "manifests\[0\].digest" err
check "a hostile index.json is refused naming the field ($(cat err))" $?
"$MCPCTL" store bogus > /dev/null 2> err
[ $? -eq 2 ]
check "an unknown store command is a usage error" $?

[ $fails -eq 0 ] && echo "all store checks passed"
exit $fails
