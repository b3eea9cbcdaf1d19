"""A Pilot served over HTTP to a team of people with tokens (``Team``), on the lab or not, and the
workflows the console tests leave at a gate (``at_gate``). Fixtures: tests/console/conftest.py."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tests.support.lab_harness import Lab
from tests.support.server_proc import PilotProcess, start_server
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.tokens import TokenStore

T = TypeVar("T")
# operator: may approve only what someone else created (four eyes by role).
ROLES = "roles:\n  operator:\n    approve: others\n    tools: '*'\n"

# A hand-back plan: a gate, then the power-off it releases (undone by a power-on).
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Off?"}}
OFF = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web-01", "confirm": True},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "web-01"},
}
# The VM each at_gate workflow powers off: one of its own, since a run holds the objects its
# writes name (conflict locks) and a second workflow writing web-01 would be refused.
VM_OF: dict[str, str] = {}
_FRESH = itertools.count(1)


def fresh_off() -> dict[str, Any]:
    """``OFF`` on a VM no other workflow of this test process writes (web-01, web-02, …)."""
    vm = f"web-{next(_FRESH):02d}"
    return {
        **OFF,
        "action": f"off_{vm}",
        "params": {"vm_name": vm, "confirm": True},
        "rollback_params": {"vm_name": vm},
    }


def run(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on a thread of its own: Playwright's sync API holds this thread's event loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


@dataclass
class Team:
    server: PilotProcess
    tokens: dict[str, str]
    pilot_home: Path

    @property
    def base(self) -> str:
        return self.server.base


def make_pilot_home(folder: Path, names: dict[str, str]) -> tuple[Path, dict[str, str]]:
    home = folder / ".vmware"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "roles.yaml").write_text(ROLES)
    (home / "roles.yaml").chmod(0o600)
    store = TokenStore(home / "tokens.json")
    return home, {name: store.create(name, role) for name, role in names.items()}


def lab_pilot_env(lab: Lab, home: Path) -> dict[str, str]:
    """The environment of a Pilot dispatching to ``lab``'s skills with its home at ``home``."""
    return {
        "HOME": str(lab.home),
        "PATH": lab.env["PATH"],
        **{k: v for k, v in lab.env.items() if k.endswith("_PASSWORD")},
        "VMWARE_PILOT_HOME": str(home),
        "VMWARE_PILOT_DISPATCH": "stdio",
    }


@contextmanager
def lab_pilot(lab: Lab, folder: Path, home: Path, tokens: dict[str, str]) -> Iterator[Team]:
    """A `vmware-pilot mcp --transport http --dispatch` on ``lab`` (``lab_pilot_env``)."""
    with start_server(folder, ["--transport", "http"], env=lab_pilot_env(lab, home)) as server:
        yield Team(server, tokens, home)


class Serving(Protocol):
    """A Pilot served over HTTP with its people's tokens (a ``Team``, or one served in-process)."""

    @property
    def server(self) -> Any: ...  # has ``url``, the MCP endpoint

    tokens: dict[str, str]


def at_gate(team: Serving, creator: str = "bob", steps: list[dict[str, Any]] | None = None) -> str:
    """A workflow created and run by ``creator`` over MCP (``steps``: ``[GATE, fresh_off()]``, its
    VM in ``VM_OF``), waiting at its gate."""
    steps = [GATE, fresh_off()] if steps is None else steps

    async def go() -> str:
        async with connect_http(team.server.url, team.tokens[creator]) as client:
            made = await client.call(
                "create_workflow", {"name": "console-test", "description": "t", "steps": steps}
            )
            assert not made.is_error, made.payload
            wid = str(made.payload["workflow_id"])
            ran = await client.call("run_workflow", {"workflow_id": wid})
            assert ran.payload["state"] == "awaiting_approval", ran.payload
            named = [s["params"].get("vm_name") for s in steps if isinstance(s.get("params"), dict)]
            VM_OF[wid] = next((str(n) for n in named if n), "")
            return wid

    return run(go())


def cancelled(team: Serving, workflow_id: str) -> None:
    """Cancel a workflow a test leaves waiting, so the objects its run holds (conflict locks) are
    free for the next test of the module."""

    async def go() -> None:
        async with connect_http(team.server.url, team.tokens["bob"]) as client:
            done = await client.call(
                "cancel_workflow", {"workflow_id": workflow_id, "reason": "test done", "confirm": True}
            )
            assert not done.is_error, done.payload

    run(go())
