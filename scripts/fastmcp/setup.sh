#!/usr/bin/env bash
# Installs fastmcp's client (pinned in requirements.txt) into its own venv, .fastmcp-venv at the
# repository's root, for tests/clients: it needs mcp 2.x, which Pilot's own venv (mcp<2) cannot
# hold. Does nothing when that venv already has exactly these requirements.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.fastmcp-venv
stamp=$venv/.installed-requirements
if [ -f "$stamp" ] && cmp -s scripts/fastmcp/requirements.txt "$stamp" && [ -x $venv/bin/python ]; then
  exit 0
fi
"${PYTHON:-python3}" -m venv "$venv"
$venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/fastmcp/requirements.txt
cp scripts/fastmcp/requirements.txt "$stamp"
