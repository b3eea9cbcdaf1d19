"""Which Pilot process is running a workflow's steps, and whether that process still lives.

A run records its process (host, pid and the pid's start time) on the workflow while a step is
in flight. Another Pilot process sharing the store (a second MCP client's server, the operator
CLI) then tells a live run from a step left ``running`` by a process that died: only the latter
is a crash. The pid's start time guards against a pid reused after a crash.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, Literal

from vmware_pilot.domain.clock import iso, utcnow
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.errors import StateRefused

__all__ = [
    "RUN_OWNER_KEY",
    "OwnerState",
    "owner_label",
    "owner_state",
    "refuse_if_running_elsewhere",
    "this_process",
]

RUN_OWNER_KEY: Final = "run_owner"

OwnerState = Literal["this", "alive", "dead", "unknown"]


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or ``""`` where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""  # field 22 of stat; the first two precede ")"


def this_process() -> dict[str, Any]:
    """``{host, pid, started}`` of the running process."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": _start_time(pid)}


def owner_state(owner: Mapping[str, Any]) -> OwnerState:
    """``this`` process, another one that is ``alive``, a ``dead`` one, or ``unknown`` (other host)."""
    if owner.get("host") != socket.gethostname():
        return "unknown"
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return "dead"
    if pid == os.getpid():
        return "this" if owner.get("started", "") == _start_time(pid) else "dead"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        pass  # it exists, under another user
    recorded = owner.get("started", "")
    return "alive" if not recorded or recorded == _start_time(pid) else "dead"


def owner_label(owner: Mapping[str, Any]) -> str:
    """``pid N on HOST`` for messages."""
    return f"pid {owner.get('pid')} on {owner.get('host')}"


def refuse_if_running_elsewhere(wf: Workflow, step: Step, stale_after: float) -> None:
    """Refuse (changing nothing) when ``step``, found ``running``, is in flight in another live Pilot.

    Without a recorded owner (a record from an older Pilot) or with a dead one, the step is a
    crash's leftover and the caller goes on. On another host liveness cannot be checked: the step
    counts as in flight until ``stale_after`` seconds after it started.
    """
    owner = wf.extra.get(RUN_OWNER_KEY)
    if not isinstance(owner, dict):
        return
    where = owner_state(owner)
    if where in ("this", "dead"):
        return
    started = step.started_at
    if where == "unknown" and started is not None and utcnow() - started > timedelta(seconds=stale_after):
        return
    raise StateRefused(
        f"Workflow '{wf.id}' is running in another Pilot process ({owner_label(owner)}): step "
        f"{step.index} ({step.skill}.{step.tool}) has been in flight since {iso(started)}. Nothing was "
        "changed",
        hint=f"Poll get_workflow_status('{wf.id}') until that run stops, then try again.",
        workflow_id=wf.id,
        state=wf.state.value,
    )
