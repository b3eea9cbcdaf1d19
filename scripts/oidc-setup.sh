#!/usr/bin/env bash
# Installs the OpenID Provider the OAuth tests run (npm package oidc-provider, pinned in
# tests/oidc/package.json and package-lock.json) into tests/oidc/node_modules (git-ignored).
# Does nothing when that install matches the lock file already. Needs Node.js and npm.
set -euo pipefail
cd "$(dirname "$0")/../tests/oidc"
stamp=node_modules/.installed-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
