#!/usr/bin/env bash
# libfaketime (Debian package faketime) for the test that runs one replica with its clock two hours
# ahead (tests/engine/test_skewed_clock.py). Installs the package when `faketime` is missing.
set -euo pipefail
if ! command -v faketime >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q faketime
fi
faketime -f +0 true
