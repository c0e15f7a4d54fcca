#!/usr/bin/env bash
# `make install` into a temporary prefix: the binaries run from there, and a
# program built against the installed libmcp with nothing but pkg-config
# (examples/embed.c) loads the demo model and predicts its digit.
#
#   test_install.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0 passes=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; passes=$((passes + 1)); fi; }

cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log" 2>&1
rc=$?; check "cmake --install into a fresh prefix ($(tail -c 300 "$TMP/install.log"))" $rc
for f in bin/mcp2026-server bin/mcpctl include/mcp/mcp.h include/mcp/status.h include/mcp/dtype.h; do
  [ -e "$TMP/prefix/$f" ]; check "installed $f" $?
done
pc=$(ls "$TMP"/prefix/lib*/pkgconfig/mcp.pc 2>/dev/null | head -1)
[ -n "$pc" ]; check "installed mcp.pc" $?
"$TMP/prefix/bin/mcp2026-server" --version | grep -q "^mcp2026-server "; check "installed server runs" $?
"$TMP/prefix/bin/mcpctl" version | grep -q "^mcpctl "; check "installed mcpctl runs" $?
if [ -n "$pc" ]; then
  export PKG_CONFIG_PATH
  PKG_CONFIG_PATH=$(dirname "$pc")
  # Flags come from the installed pkg-config file alone.
  cc -std=c11 -o "$TMP/embed" "$SRC/examples/embed.c" $(pkg-config --cflags --libs mcp) > "$TMP/cc.log" 2>&1
  rc=$?; check "examples/embed.c builds against the installed libmcp ($(head -c 400 "$TMP/cc.log"))" $rc
  "$TMP/embed" "$SRC/models/demo/digits.onnx" > "$TMP/embed.out" 2>&1
  rc=$?; check "the installed library runs the demo model ($(tail -c 200 "$TMP/embed.out"))" $rc
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
