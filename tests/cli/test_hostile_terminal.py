"""A hostile plan through every operator command on a real pseudo-terminal.

Every free text an agent or a skill can still store (workflow name, description, goal, action,
params and their names, gate message, reasons, a skill's error, a template's description) carries escape
sequences, carriage returns, C1 controls and a bidi override. What a person sees must show them
as escapes and never pass one to the terminal: with TERM=dumb Rich writes no escape sequence of
its own, so any ESC byte on the terminal came from data.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.pty_terminal import Terminal
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, DesignRequest, RunRequest

# A CLI process on a pty per command (~15 s); test_operator.py shows text literally in-process.
pytestmark = pytest.mark.slow

# Clear the screen, move up and erase a line, set the window title, a C1 CSI, a bidi override.
EVIL = "\x1b[2J\x1b[1A\x1b[2K\x1b]0;owned\x07\rok\x9b31m\u202eevil\x08"
SHOWN = "\\x1b[2J\\x1b[1A\\x1b[2K\\x1b]0;owned\\x07\\rok\\x9b31m\\u202eevil\\x08"
GATE = {
    "action": "require_approval",
    "skill": "pilot",
    "tool": "approve",
    "params": {"message": f"gate {EVIL}"},
}
LOOK = {
    "action": f"look {EVIL}",
    "skill": "monitor",
    "tool": "get_vm_info",
    "params": {"vm_name": f"web {EVIL}"},
}
OFF = {
    "action": f"off {EVIL}",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": f"web {EVIL}", "note": {"deep": [EVIL]}, f"key {EVIL}": ""},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": EVIL},
}


def assert_safe(seen: str, shown: bool = True) -> None:
    """No control character from data reached the terminal, and (``shown``) its escaped form is visible."""
    assert "\x1b" not in seen, seen
    assert "\x9b" not in seen and "\u202e" not in seen and "\x08" not in seen and "\x07" not in seen
    assert "\r" not in seen.replace("\r\n", "\n"), seen  # the pty turns each \n into \r\n
    assert not shown or "\\x1b[2J" in seen, seen


@pytest.fixture
def hostile(settings: Settings) -> dict[str, str]:
    """Workflows full of EVIL: one waiting at its gate, one whose step failed, a draft, a template."""
    app = build_app(settings)
    agent = Actor("agent")
    try:
        service = app.service
        waiting = service.create_workflow(
            CreateRequest(agent, f"plan {EVIL}", f"desc {EVIL}", [GATE, OFF])
        ).payload()["workflow_id"]
        asyncio.run(service.run_workflow(RunRequest(agent, waiting))).payload()
        other_vm = {**OFF, "params": {**OFF["params"], "vm_name": f"db {EVIL}"}}  # the waiting one holds web
        failed = service.create_workflow(
            CreateRequest(agent, f"failed {EVIL}", EVIL, [GATE, other_vm])
        ).payload()["workflow_id"]
        asyncio.run(service.run_workflow(RunRequest(agent, failed))).payload()
        wf = app.store.workflows.load(failed)
        wf.steps[1].result = {"error": f"skill says {EVIL}"}
        wf.blocked_reason = f"blocked {EVIL}"
        app.store.workflows.save(wf)
        draft = service.design_workflow(DesignRequest(agent, f"goal {EVIL}", EVIL)).payload()["workflow_id"]
        folder = settings.home / "workflows"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "evil.yaml").write_text(
            yaml.safe_dump({"name": "evil", "description": f"tpl {EVIL}", "steps": [GATE, OFF]})
        )
        (folder / "broken.yaml").write_text(yaml.safe_dump({"name": "broken", "steps": [{"skill": EVIL}]}))
        return {"waiting": str(waiting), "failed": str(failed), "draft": str(draft)}
    finally:
        app.close()


def on_terminal(*args: str, answer: str | None = None) -> tuple[int, str]:
    term = Terminal(*args, user="tess")
    if answer is not None:
        term.read_until("[y/N]")
        term.type(answer)
    code = term.finish()
    return code, term.seen


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(("workflows",), id="workflows"),
        pytest.param(("status", "{waiting}"), id="status-waiting"),
        pytest.param(("status", "{failed}", "--audit", "50"), id="status-failed"),
        pytest.param(("status", "{draft}"), id="status-draft"),
        pytest.param(("review", "{waiting}"), id="review"),  # an empty param named with EVIL
        pytest.param(("templates",), id="templates"),
        pytest.param(("cancel", "{failed}", "--reason", f"why {EVIL}", "--yes"), id="cancel"),
        pytest.param(("reject", "{waiting}", "--reason", f"no {EVIL}", "--yes"), id="reject"),
        pytest.param(("rollback", "{failed}", "--yes"), id="rollback"),
        pytest.param(("status", f"wf-{EVIL}"), id="status-unknown-id"),
    ],
)
def test_every_read_and_act_command_shows_controls_as_escapes(
    hostile: dict[str, str], command: tuple[str, ...]
) -> None:
    args = [a.format(**hostile) if a.startswith("{") else a for a in command]
    _, seen = on_terminal(*args)
    # the rollback preview shows counts and step names only
    assert_safe(seen, shown=command[0] != "rollback")


def test_approve_shows_the_hostile_gate_as_escapes_before_asking(hostile: dict[str, str]) -> None:
    code, seen = on_terminal("approve", hostile["waiting"], answer="n")
    assert code == 1
    assert "aiops.power_off_vm" in seen and "power_on_vm" in seen
    assert "gate \\x1b[2J" in seen
    assert_safe(seen)


def test_run_of_a_hostile_steps_file_shows_escapes(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump({"name": f"run {EVIL}", "description": EVIL, "steps": [OFF, GATE, OFF]}))
    _, seen = on_terminal("run", "--steps", str(path))
    assert_safe(seen)
    path.write_text(yaml.safe_dump({"name": "run", "steps": [LOOK, GATE, OFF]}))
    _, seen = on_terminal("run", "--steps", str(path), answer="n")
    assert "\\u001b[2J" in seen and "gate \\x1b[2J" in seen  # the handed-out params (JSON), the gate
    assert_safe(seen)


def test_status_json_holds_no_raw_control_character(hostile: dict[str, str]) -> None:
    _, seen = on_terminal("status", hostile["failed"], "--json")
    assert_safe(seen, shown=False)
    assert "skill says \\u001b[2J" in seen
    body = seen.replace("\r\n", "\n")
    data: dict[str, Any] = json.loads(body[body.index("{") :])
    assert data["steps"][1]["result"]["error"] == f"skill says {EVIL}"
