#!/usr/bin/env bash
# Installs the Node.js clients the e2e tests drive against the server (the
# OpenAI SDK, npm package openai) from tests/e2e/node/package-lock.json into
# .cache/node (or $MCP_NODE_CLIENTS_DIR). Nothing installed here is
# committed. Idempotent: kept while the lock file is unchanged.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$ROOT/tests/e2e/node"
DEST="${MCP_NODE_CLIENTS_DIR:-$ROOT/.cache/node}"
sum="$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -c1-16)"
STAMP="$DEST/.mcp-installed-$sum"

if [ -f "$STAMP" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch-node-clients: npm is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
rm -rf "$DEST"
mkdir -p "$DEST"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
echo "fetch-node-clients: npm ci in $DEST"
(cd "$DEST" && npm ci --silent --no-audit --no-fund >/dev/null)
touch "$STAMP"
echo "fetch-node-clients: openai $(node -p "require('$DEST/node_modules/openai/package.json').version")"
