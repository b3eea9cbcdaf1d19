#!/usr/bin/env bash
# Prometheus for tests/transports/test_metrics.py, which starts a private one that scrapes a test
# server. Installs Debian's package when missing (its service is not started: the tests run their own).
set -euo pipefail
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends prometheus
fi
prometheus --version 2>&1 | head -1
