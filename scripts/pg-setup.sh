#!/usr/bin/env bash
# PostgreSQL 15 for the test suite (tests/support/pg_server.py starts a private server from these binaries).
# Installs the Debian package when missing. PostgreSQL refuses to run as root: when the tests run as
# root, they hand the server's temporary folder to $VMWARE_PILOT_TEST_PG_USER (default postgres),
# created here as a system user when it does not exist.
set -euo pipefail
BIN=${VMWARE_PILOT_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$BIN/pg_ctl" ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q postgresql-15
fi
if [ "$(id -u)" -eq 0 ]; then
  user=${VMWARE_PILOT_TEST_PG_USER:-postgres}
  if ! id "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
  fi
fi
"$BIN/postgres" --version
