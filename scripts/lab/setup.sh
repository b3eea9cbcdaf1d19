#!/usr/bin/env bash
# Builds the lab that the `lab` tests use, under .lab/ (gitignored):
#   .lab/bin/vcsim-lab   govmomi's vCenter simulator (our scripts/lab/vcsim/main.go, Debian's govmomi)
#   .lab/bin/vcsim-twin  the simulator of `vmware-pilot twin` (vcsim's -load / -l flags; scripts/twin/vcsim)
#   .lab/bin/govc-twin   govc's object.save and the overlay's vm.power, vm.migrate, snapshot.create/remove
#                        and host.maintenance for the twin (scripts/twin/govc)
#   .lab/companions/     a venv with the pinned companion skills of scripts/lab/companions.txt
# Idempotent: each part is rebuilt only when its inputs changed, so a rerun is a quick no-op.
set -euo pipefail
cd "$(dirname "$0")/../.."
LAB=.lab
PY=${PYTHON:-python3}
APT_PACKAGES=(golang-go golang-github-vmware-govmomi-dev)
mkdir -p "$LAB/bin" "$LAB/stamps"

say() { echo "lab: $*" >&2; }

fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# 1. Debian packages: Go and govmomi's sources (installed only when missing).
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Refresh the package lists only when the install cannot be done with the ones we have.
  if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >"$LAB/apt.log" 2>&1; then
    $SUDO apt-get update -q >>"$LAB/apt.log" 2>&1
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$LAB/apt.log" 2>&1 \
      || { tail -20 "$LAB/apt.log" >&2; say "apt-get install failed (log: $LAB/apt.log)"; exit 1; }
  fi
fi

# 2. The simulator binary.
sim_stamp=$(fingerprint scripts/lab/vcsim/main.go <(go version) <(dpkg-query -W golang-github-vmware-govmomi-dev))
if [ -x "$LAB/bin/vcsim-lab" ] && [ "$(cat "$LAB/stamps/vcsim" 2>/dev/null)" = "$sim_stamp" ]; then
  say "simulator up to date ($LAB/bin/vcsim-lab)"
else
  say "building the simulator"
  rm -f "$LAB/stamps/vcsim"
  GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE="$PWD/$LAB/go-cache" \
    go build -o "$LAB/bin/vcsim-lab.tmp" ./scripts/lab/vcsim
  mv -f "$LAB/bin/vcsim-lab.tmp" "$LAB/bin/vcsim-lab"
  echo "$sim_stamp" >"$LAB/stamps/vcsim"
fi

# 2b. The twin's simulator and capture tool (vmware-pilot twin), from the same govmomi sources.
for part in vcsim govc; do
  twin_stamp=$(fingerprint "scripts/twin/$part/main.go" <(go version) <(dpkg-query -W golang-github-vmware-govmomi-dev))
  if [ -x "$LAB/bin/$part-twin" ] && [ "$(cat "$LAB/stamps/$part-twin" 2>/dev/null)" = "$twin_stamp" ]; then
    say "$part-twin up to date ($LAB/bin/$part-twin)"
  else
    say "building $part-twin"
    rm -f "$LAB/stamps/$part-twin"
    GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE="$PWD/$LAB/go-cache" \
      go build -o "$LAB/bin/$part-twin.tmp" "./scripts/twin/$part"
    mv -f "$LAB/bin/$part-twin.tmp" "$LAB/bin/$part-twin"
    echo "$twin_stamp" >"$LAB/stamps/$part-twin"
  fi
done

# 3. The companion skills' venv.
comp_stamp=$(fingerprint scripts/lab/companions.txt <("$PY" --version))
if [ -x "$LAB/companions/bin/vmware-monitor-mcp" ] && [ -x "$LAB/companions/bin/vmware-aiops-mcp" ] \
  && [ -x "$LAB/companions/bin/vmware-storage-mcp" ] \
  && [ "$(cat "$LAB/stamps/companions" 2>/dev/null)" = "$comp_stamp" ]; then
  say "companion skills up to date ($LAB/companions)"
else
  say "installing the companion skills into $LAB/companions"
  rm -rf "$LAB/companions" "$LAB/stamps/companions"
  "$PY" -m venv "$LAB/companions"
  if ! "$LAB/companions/bin/python" -m pip install -q --disable-pip-version-check \
      -r scripts/lab/companions.txt >"$LAB/pip.log" 2>&1; then
    tail -20 "$LAB/pip.log" >&2
    rm -rf "$LAB/companions"
    say "pip install failed (log: $LAB/pip.log)"
    exit 1
  fi
  "$LAB/companions/bin/python" -c "import vmware_monitor.mcp_server, vmware_aiops.mcp_server, vmware_storage.mcp_server"
  echo "$comp_stamp" >"$LAB/stamps/companions"
fi
say "ready"
