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
from vmware_pilot.safety.redaction import redact

__all__ = ["step_document", "template_document", "write_template"]


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
        "description": description,
        "steps": [redact(step_document(s)) for s in steps],
    }
    names = sorted({a for a in authors if a})
    if names:
        doc["authors"] = names
    return doc


def write_template(folder: Path, name: str, document: dict[str, Any]) -> Path:
    """Write ``<folder>/<name>.yaml`` atomically (mode 0600, folder 0700); return the path."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    target = folder / f"{name}.yaml"
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, default_flow_style=False)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    target.chmod(0o600)
    return target
