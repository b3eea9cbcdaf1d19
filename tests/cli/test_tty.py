"""The confirmation a person types at a real terminal: `vmware-pilot` in a subprocess on a pty."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.pty_terminal import Terminal
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, RunRequest

# A CLI process on a pty per test; test_operator.py covers approve and run in-process.
pytestmark = pytest.mark.slow

GATE = {
    "action": "require_approval",
    "skill": "pilot",
    "tool": "approve",
    "params": {"message": "Power off web-01?"},
}
ME = Actor.os_user().name
OFF = {"action": "off", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "web-01"}}


@pytest.fixture
def waiting(settings: Settings) -> str:
    app = build_app(settings)
    try:
        wid = str(
            app.service.create_workflow(CreateRequest(Actor("agent"), "off-web", "d", [GATE, OFF])).payload()[
                "workflow_id"
            ]
        )
        asyncio.run(app.service.run_workflow(RunRequest(Actor("agent"), wid))).payload()
        return wid
    finally:
        app.close()


def state_of(settings: Settings, wid: str) -> tuple[str, str]:
    app = build_app(settings)
    try:
        status = app.service.get_workflow_status(wid).payload()
        return status["state"], status["approved_by"]
    finally:
        app.close()


def test_approve_asks_at_the_terminal_and_yes_approves(settings: Settings, waiting: str) -> None:
    term = Terminal("approve", waiting, user="tess")
    shown = term.read_until("[y/N]")
    assert "Power off web-01?" in shown and "aiops.power_off_vm" in shown and "Asked by agent" in shown
    assert f"Approve this gate as {ME}?" in shown
    term.type("y")
    assert term.finish() == 0, term.seen
    assert state_of(settings, waiting) == ("pending", ME)


def test_approve_answered_no_changes_nothing(settings: Settings, waiting: str) -> None:
    term = Terminal("approve", waiting, user="tess")
    term.read_until("[y/N]")
    term.type("n")
    assert term.finish() == 1
    assert "nothing was changed" in term.seen
    assert state_of(settings, waiting) == ("awaiting_approval", "")


def test_run_stops_at_the_gate_and_asks_the_person(settings: Settings) -> None:
    term = Terminal(
        "run", "incident_response", "-p", "alert_entity=web-01", "-p", "alert_name=CPU", user="tess"
    )
    shown = term.read_until("[y/N]")
    assert "monitor.get_alarms" in shown and "Did you perform the 2 step(s)" in shown
    term.type("y")
    assert term.finish() == 0, term.seen
    assert "aiops.acknowledge_vcenter_alarm" in term.seen
    app = build_app(settings)
    try:
        (row,) = app.store.workflows.list_all()
        assert app.service.get_workflow_status(row["id"]).payload()["approved_by"] == ME
    finally:
        app.close()


def test_the_compact_panel_ends_with_the_decision_right_above_the_prompt(settings: Settings) -> None:
    # A two-VM restart: the whole gate fits a 50-row terminal, its last lines the decision summary.
    app = build_app(settings)
    steps = [
        {**GATE, "params": {"message": "Restart web-01 and web-02?", "approvals_required": 2}},
        {
            **OFF,
            "params": {"vm_name": "web-01"},
            "rollback_tool": "power_on_vm",
            "rollback_params": {"vm_name": "web-01"},
        },
        {
            **OFF,
            "params": {"vm_name": "web-02"},
            "rollback_tool": "power_on_vm",
            "rollback_params": {"vm_name": "web-02"},
        },
        {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-01"}},
        {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-02"}},
    ]
    try:
        wid = str(
            app.service.create_workflow(
                CreateRequest(Actor("agent"), "restart-web", "Kernel patch INC4711", steps)
            ).payload()["workflow_id"]
        )
        asyncio.run(app.service.run_workflow(RunRequest(Actor("agent"), wid))).payload()
    finally:
        app.close()
    term = Terminal("approve", wid, "--comment", "checked the load balancer", user="tess")
    shown = term.read_until("[y/N]")
    term.type("y")
    assert term.finish() == 0, term.seen
    rows = [line for line in shown.splitlines() if line.strip()]
    prompt = next(i for i, line in enumerate(rows) if "Approve this gate as" in line)
    assert prompt < 50, shown  # the gate message has not scrolled off a 50-row terminal
    top = next(i for i, line in enumerate(rows) if "Decision" in line and "╭" in line)
    assert rows[prompt - 1].startswith("╰"), rows  # the decision panel ends right above the prompt
    decision = " ".join(line.strip(" │") for line in rows[top + 1 : prompt - 1])
    for said in (
        "Asked by agent — Kernel patch INC4711",
        "Verdict: unknown",
        "Approvals: 0 of 2; 2 more needed",
    ):
        assert said in decision, decision
    assert "left)" in decision and "You may approve or reject." in decision
    assert "plan digest" not in shown and "params:" not in shown  # --full shows those
    app = build_app(settings)
    try:
        approvals = app.service.get_workflow_status(wid).payload()["gates"][0]["approvals"]
    finally:
        app.close()
    assert [(a["approver"], a["comment"]) for a in approvals] == [(ME, "checked the load balancer")]
