#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs, then lint, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
if [ -x scripts/lab/setup.sh ]; then bash scripts/lab/setup.sh; fi
bash scripts/oidc-setup.sh
bash scripts/node/setup.sh  # third-party MCP clients for tests/clients (npm ci, pinned)
bash scripts/fastmcp/setup.sh  # fastmcp's client for tests/clients, in its own venv (it needs mcp 2.x)
bash scripts/console-setup.sh
bash scripts/pg-setup.sh    # PostgreSQL 15 for the tests on the PostgreSQL backend
bash scripts/faketime-setup.sh  # libfaketime: a replica with a skewed clock
bash scripts/prometheus-setup.sh  # a real Prometheus scrapes a test server (tests/transports/test_metrics.py)
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
