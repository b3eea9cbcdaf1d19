"""Captures: the inventory of the vCenter a skill target names, saved by ``govc object.save`` in the
format govmomi's simulator loads (``vcsim -load DIR``), kept under ``<home>/twins/<id>/``.

A capture is a folder ``objects/`` (the XML files govc wrote) and ``capture.json``: its id, the
target, the vCenter (host and port only), when it was taken, how many objects it holds and the
SHA-256 digest of its files. The account comes from the monitor skill's own configuration for the
target (``~/.vmware-monitor/config.yaml``, read only; password from ``VMWARE_<TARGET>_PASSWORD`` or
its ``.env``) unless Pilot has one set (``VMWARE_PILOT_TWIN_USERNAME`` / ``_PASSWORD``). The password
reaches govc through its environment only, and is never written or logged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from vmware_pilot.safety.redaction import redact_text
from vmware_pilot.twin.binaries import TwinError, find_binary

__all__ = [
    "ID_PATTERN",
    "Account",
    "Capture",
    "TwinError",
    "account_for",
    "capture",
    "digest_of",
    "inventory_facts",
    "list_captures",
    "remove_capture",
    "twins_dir",
]

ID_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}$")
_TARGET: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Capture:
    """One capture as ``capture.json`` records it (``path``: its folder)."""

    id: str
    target: str
    vcenter: str
    at: str
    objects: int
    digest: str
    path: str

    @property
    def objects_dir(self) -> Path:
        return Path(self.path) / "objects"

    def age_seconds(self, now: datetime | None = None) -> float:
        taken = datetime.fromisoformat(self.at.replace("Z", "+00:00"))
        return max(0.0, ((now or datetime.now(UTC)) - taken).total_seconds())

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("path")
        return data


@dataclass(frozen=True)
class Account:
    """Where and as whom to log in (``password`` is never shown: see ``__repr__``)."""

    host: str
    port: int
    username: str
    password: str
    verify_ssl: bool

    def __repr__(self) -> str:
        return f"Account(host={self.host!r}, port={self.port}, username={self.username!r}, password=***)"

    @property
    def vcenter(self) -> str:
        return f"{self.host}:{self.port}"

    def govc_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The environment of a govc child: the connection in GOVC_* variables, never on its command line."""
        env = {k: v for k, v in base.items() if not k.startswith("GOVC_")}
        env.update(
            GOVC_URL=f"https://{self.host}:{self.port}/sdk",
            GOVC_USERNAME=self.username,
            GOVC_PASSWORD=self.password,
            GOVC_INSECURE="0" if self.verify_ssl else "1",
        )
        return env


def twins_dir(home: Path) -> Path:
    return home / "twins"


def _env_file_value(path: Path, key: str) -> str:
    """``key``'s value in a dotenv file (monitor's ``.env``), ``b64:`` decoded as the skill does."""
    try:
        text = path.read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        name, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and name.strip() == key:
            value = value.strip().strip("'\"")
            if value.startswith("b64:"):
                try:
                    return base64.b64decode(value[4:], validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    return value
            return value
    return ""


def account_for(
    target: str, home: Path, environ: Mapping[str, str], username: str = "", password: str = ""
) -> Account:
    """The account to capture ``target`` with: the monitor skill's (read only), or Pilot's own
    ``username``/``password`` when set. ``home``: the operator's home folder."""
    if not _TARGET.match(target):
        raise TwinError(
            f"'{target[:64]}' is not a target name", hint="Name a target of ~/.vmware-monitor/config.yaml."
        )
    import yaml  # only a capture reads it: the server's start-up and calls never load a YAML parser

    config = home / ".vmware-monitor" / "config.yaml"
    try:
        data = yaml.safe_load(config.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise TwinError(
            f"cannot read the monitor skill's configuration {config}: {type(exc).__name__}",
            hint="Configure the target in vmware-monitor first (vmware-monitor init).",
        ) from None
    targets = data.get("targets") if isinstance(data, dict) else None
    entry = next((t for t in targets or [] if isinstance(t, dict) and str(t.get("name", "")) == target), None)
    if entry is None or not entry.get("host"):
        raise TwinError(
            f"target '{target}' is not in {config}",
            hint="Capture a target the monitor skill knows (its config.yaml `targets:`).",
        )
    key = f"VMWARE_{target.upper().replace('-', '_')}"
    user = username or environ.get(f"{key}_USERNAME", "") or str(entry.get("username") or "")
    secret = (
        password
        or environ.get(f"{key}_PASSWORD", "")
        or _env_file_value(config.parent / ".env", f"{key}_PASSWORD")
    )
    if not secret:
        raise TwinError(
            f"no password for target '{target}'",
            hint=f"Set {key}_PASSWORD (as the monitor skill reads it) or VMWARE_PILOT_TWIN_PASSWORD.",
        )
    return Account(
        host=str(entry["host"]),
        port=int(entry.get("port") or 443),
        username=user,
        password=secret,
        verify_ssl=bool(entry.get("verify_ssl", True)),
    )


def digest_of(folder: Path) -> tuple[str, int]:
    """``sha256:<hex>`` over the files' relative paths and contents, and the number of objects
    (the top-level XML files, one per managed object)."""
    h = hashlib.sha256()
    count = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
        count += path.parent == folder and path.suffix == ".xml"
    return "sha256:" + h.hexdigest(), count


def _read(path: Path) -> Capture | None:
    try:
        data = json.loads((path / "capture.json").read_text())
        return Capture(
            **{k: data[k] for k in ("id", "target", "vcenter", "at", "objects", "digest")}, path=str(path)
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_captures(home: Path) -> list[Capture]:
    """The captures kept in the Pilot home, newest first."""
    folder = twins_dir(home)
    found = [c for p in sorted(folder.iterdir()) if p.is_dir() and (c := _read(p))] if folder.is_dir() else []
    return sorted(found, key=lambda c: c.at, reverse=True)


def remove_capture(home: Path, capture_id: str) -> Capture:
    if not ID_PATTERN.match(capture_id):
        raise TwinError(f"'{capture_id[:64]}' is not a capture id", hint="See `vmware-pilot twin list`.")
    found = next((c for c in list_captures(home) if c.id == capture_id), None)
    if found is None:
        raise TwinError(f"no capture '{capture_id}'", hint="See `vmware-pilot twin list`.")
    shutil.rmtree(found.path)
    return found


def capture(
    target: str,
    home: Path,
    account: Account,
    *,
    govc: str = "",
    progress: Callable[[int], None] | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = 3600.0,
) -> Capture:
    """Run ``govc object.save`` against ``account``'s vCenter into a new capture of ``target``;
    ``progress`` is told the number of objects saved so far as govc saves them."""
    binary = find_binary("govc", govc)
    now = datetime.now(UTC).replace(microsecond=0)
    capture_id = f"{target}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    folder = twins_dir(home) / capture_id
    if folder.exists():
        raise TwinError(f"capture '{capture_id}' exists already", hint="Wait a second and capture again.")
    folder.mkdir(parents=True, mode=0o700)
    twins_dir(home).chmod(0o700)
    objects = folder / "objects"
    env = account.govc_env(environ if environ is not None else os.environ)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [binary, "object.save", "-v", "-d", str(objects)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        saved = 0
        for line in proc.stdout:
            if line.startswith("Saving "):
                saved += 1
                if progress is not None:
                    progress(saved)
            if time.monotonic() - started > timeout:
                proc.kill()
                break
        err = proc.stderr.read() if proc.stderr else ""
        code = proc.wait()
        if code != 0:
            said = redact_text(" ".join(err.split())[-400:]).replace(account.password, "***")
            raise TwinError(
                f"govc object.save of {account.vcenter} failed (exit {code}): {said or 'no message'}",
                hint="Check the account (read-only is enough) and that the vCenter is reachable.",
            )
        digest, count = digest_of(objects)
        record = Capture(
            capture_id,
            target,
            account.vcenter,
            now.isoformat().replace("+00:00", "Z"),
            count,
            digest,
            str(folder),
        )
        (folder / "capture.json").write_text(json.dumps(record.public(), indent=2) + "\n")
        return record
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


# --- what a capture says of its objects (for the rehearsal's diff and the tests) -------------
_FIELDS: Final = {
    ("runtime", "powerState"): "power_state",
    ("runtime", "connectionState"): "connection_state",
    ("runtime", "inMaintenanceMode"): "maintenance_mode",
    ("guest", "toolsRunningStatus"): "tools_status",
}


def _snapshot_names(val: ET.Element) -> list[str]:
    names: list[str] = []

    def walk(node: ET.Element) -> None:
        for tree in node.findall("rootSnapshotList") + node.findall("childSnapshotList"):
            name = tree.findtext("name")
            if name:
                names.append(name)
            walk(tree)

    walk(val)
    return names


def _objects(folder: Path) -> Iterator[tuple[str, str, ET.Element]]:
    for path in sorted(folder.glob("*.xml")):
        try:
            # govc's own output; expat (>= 2.4) bounds entity expansion.
            root = ET.parse(path).getroot()  # noqa: S314
        except ET.ParseError as exc:
            raise TwinError(
                f"capture file {path.name} is not readable XML ({exc})", hint="Capture again."
            ) from None
        obj = root.find("obj")
        if obj is None:
            continue
        yield str(obj.get("type") or ""), str(obj.text or ""), root


def inventory_facts(folder: Path) -> dict[str, dict[str, Any]]:
    """Per managed entity (``Type:moref``): its name, parent, and the fields the gate reads (power
    state, VMware Tools, snapshots, host, maintenance mode, connection), from a capture folder."""
    facts: dict[str, dict[str, Any]] = {}
    for kind, ref, root in _objects(folder):
        props = {p.findtext("name"): p.find("val") for p in root.findall("propSet")}
        if "name" not in props:
            continue  # not a managed entity (a manager, a browser)
        entry: dict[str, Any] = {
            "type": kind,
            "name": (props["name"].text if props["name"] is not None else "") or "",
        }
        parent = props.get("parent")
        if parent is not None and parent.text:
            entry["parent"] = f"{parent.get('type')}:{parent.text}"
        for (prop, child), field in _FIELDS.items():
            val = props.get(prop)
            if val is not None and val.findtext(child) is not None:
                entry[field] = val.findtext(child)
        runtime = props.get("runtime")
        if kind == "VirtualMachine" and runtime is not None and runtime.find("host") is not None:
            entry["host"] = runtime.findtext("host")
        if kind == "VirtualMachine":
            snap = props.get("snapshot")
            entry["snapshots"] = _snapshot_names(snap) if snap is not None else []
        facts[f"{kind}:{ref}"] = entry
    return facts
