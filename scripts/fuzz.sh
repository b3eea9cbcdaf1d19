#!/usr/bin/env bash
# The fuzz tests with many more examples than CI runs (Hypothesis profile "long": 1500 per test).
# Usage: bash scripts/fuzz.sh [pytest args], e.g. bash scripts/fuzz.sh -k http
# Failures Hypothesis finds are kept in .hypothesis/ and tried first on the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "scripts/fuzz.sh: run bash scripts/test.sh once first (it makes .venv)" >&2; exit 2; }
HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-long} exec .venv/bin/python -m pytest tests/fuzz \
  -p no:cacheprovider --hypothesis-show-statistics "$@"
