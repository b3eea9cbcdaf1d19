"""Writing a workflow's steps as a custom YAML template: redacted, atomic, readable only by the owner."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from vmware_pilot.domain.model import Step
from vmware_pilot.safety.redaction import redact, redact_text

__all__ = [
    "restore_template",
    "step_document",
    "template_document",
    "template_text",
    "write_into",
    "write_text",
]


def step_document(step: Step) -> dict[str, Any]:
    """``{action, skill, tool, params, [rollback_tool, rollback_params], [group_id]}``."""
    out: dict[str, Any] = {
        "action": step.action,
        "skill": step.skill,
        "tool": step.tool,
        "params": dict(step.params),
    }
    if step.rollback_tool:
        out["rollback_tool"] = step.rollback_tool
        out["rollback_params"] = dict(step.rollback_params)
    if step.group_id:
        out["group_id"] = step.group_id
    return out


def template_document(
    name: str, description: str, steps: Sequence[Step], authors: Iterable[str]
) -> dict[str, Any]:
    """The YAML content, secrets masked; ``authors`` only when there are any."""
    doc: dict[str, Any] = {
        "name": name,
        "description": redact_text(description),
        "steps": [redact(step_document(s)) for s in steps],
    }
    names = sorted({str(a) for a in authors if a})
    if names:
        doc["authors"] = names
    return doc


def _replace(folder: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to ``<folder>/<name>.yaml`` through a private temporary file and a rename."""
    target = folder / f"{name}.yaml"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    target.chmod(0o600)
    return target


class _PlainDumper(yaml.SafeDumper):
    """Writes a value used twice out twice: no anchors and aliases for a reader to expand."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def template_text(document: dict[str, Any]) -> str:
    """The YAML text of a template document (no anchors, keys in the document's order)."""
    return yaml.dump(
        document, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, default_flow_style=False
    )


def write_text(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` as ``<folder>/<name>.yaml`` of Pilot's own templates folder atomically (mode
    0600, folder 0700); return the path."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    return _replace(folder, name, text.encode("utf-8"))


def write_into(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` as ``<folder>/<name>.yaml`` (mode 0600) in a folder that exists and is not
    Pilot's: its mode is left as it is."""
    return _replace(folder, name, text.encode("utf-8"))


def restore_template(path: Path, previous: bytes) -> None:
    """Put ``previous`` back as the content of ``path`` (a save whose workflow was not stored)."""
    _replace(path.parent, path.stem, previous)
