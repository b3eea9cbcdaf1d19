#!/usr/bin/env bash
# Installs what the console's browser tests need: Debian's chromium (apt-get, when missing; the
# tests drive it with Playwright for Python and never let Playwright download a browser) and
# axe-core (pinned in tests/console/package.json and package-lock.json) into
# tests/console/node_modules (git-ignored). Does nothing for what is installed already.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
fi
cd "$(dirname "$0")/../tests/console"
stamp=node_modules/.installed-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
