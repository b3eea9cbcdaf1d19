"""The drift check (engine/execution/drift_check.py) through the engine and a real MCP client
session: a VM powered off between approval and dispatch stops the run before the power-off is
called, at the gate again, saying what changed; audited and announced as ``drift_detected``;
approving again runs it against the new state. The plan's own changes are no drift;
``VMWARE_PILOT_DRIFT_CHECK=off`` sends the step as approved; hand-back mode says the check is the
agent's."""

from __future__ import annotations

import json

import pytest

from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import connect
from tests.support.prediction import Estate, at_gate, gate, restart
from tests.support.receiver import Receiver, serve
from vmware_pilot import telemetry
from vmware_pilot.adapters.webhook import events_for
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest


class Counted:
    """A telemetry listener keeping the write holds counted."""

    def __init__(self) -> None:
        self.holds: list[dict[str, str]] = []

    def count(self, name: str, labels: dict[str, str]) -> None:
        if name == "write_holds":
            self.holds.append(labels)

    def observe(self, name: str, value: float, labels: dict[str, str]) -> None: ...


def acted(dispatcher: ScriptedDispatcher) -> list[str]:
    """The write calls that acted (not the gate's previews, sent with confirm: false)."""
    return [
        f"{tool}:{params.get('vm_name')}"
        for skill, tool, params in dispatcher.step_calls
        if skill == "aiops" and params.get("confirm") is not False
    ]


def powered_off_by_someone(estate: Estate) -> None:
    """What a person does on vCenter between the approval and the dispatch."""
    estate.power, estate.tools = "poweredOff", False


async def test_a_vm_powered_off_after_approval_stops_the_run_before_the_power_off(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    estate = Estate(dispatcher, tools=True)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    assert dapp.service.get_workflow_status(wid).payload()["prediction"]["verdict"] == "succeeds"
    powered_off_by_someone(estate)

    counted = Counted()
    stop = telemetry.listen(counted)
    try:
        out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    finally:
        stop()
    assert counted.holds == [{"kind": "drift"}], "measured: pilot_write_holds_total{kind='drift'}"
    assert out["outcome"] == "awaiting_approval" and acted(dispatcher) == [], "power_off_vm was not called"
    assert [s["status"] for s in out["steps"]] == ["pending", "pending", "pending", "pending"]
    message = out["pending_gate"]["message"]
    assert message.startswith("DRIFT before step 1 (aiops.power_off_vm), which Pilot did not call: ")
    assert "web power_state: the approver saw poweredOn (as read at the gate, " in message
    assert "it is poweredOff now" in message
    assert "web tools_status: the approver saw guestToolsRunning" in message

    status = dapp.service.get_workflow_status(wid).payload()
    (drift,) = [e for e in status["audit_log"] if e["action"] == "drift_detected"]
    assert "Step 1 (aiops.power_off_vm) held at the gate at step 0: DRIFT" in drift["detail"]
    (record,) = status["gates"]
    assert record["hold"]["kind"] == "drift" and record["hold"]["step"] == 1
    assert record["hold"]["details"]["changes"][0] == {
        "object": "web",
        "field": "power_state",
        "approved": "poweredOn",
        "now": "poweredOff",
        "set_by": None,
    }
    assert [a["approver"] for a in record["earlier"][0]["approvals"]] == ["alice"]
    assert record["approvals"] == [] and record["approvals_missing"] == 1
    # The approver is shown the new state: the prediction is made again from it.
    assert [(s["step"], s["outcome"]) for s in status["prediction"]["steps"]] == [
        (1, "no_change"),
        (2, "succeeds"),
        (3, "succeeds"),
    ]
    # Announced with its own event, with the gate as for any approval request.
    wf = dapp.store.workflows.load(wid)
    (announced,) = events_for(WorkflowState.RUNNING, wf)
    assert announced["event"] == "drift_detected" and announced["step"] == 0
    assert announced["hold"]["details"]["changes"][0]["now"] == "poweredOff"

    done = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert done["outcome"] == "completed"
    assert acted(dispatcher) == ["power_off_vm:web", "power_on_vm:web"]
    assert [e["action"] for e in done["audit_log"]].count("drift_detected") == 1


async def test_the_plans_own_power_off_is_no_drift_for_its_power_on(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher, tools=True)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    assert acted(dispatcher) == ["power_off_vm:web", "power_on_vm:web"]
    assert "drift_detected" not in [e["action"] for e in out["audit_log"]]


async def test_drift_through_the_mcp_tools(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    estate = Estate(dispatcher, tools=True)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    powered_off_by_someone(estate)
    async with connect(dapp) as client:
        held = await client.call("approve", workflow_id=wid, approver="alice", gate_step=0)
        assert held.payload["outcome"] == "awaiting_approval"
        assert "it is poweredOff now" in held.payload["pending_gate"]["message"]
        status = await client.status(wid)
        assert status["state"] == "awaiting_approval" and status["gates"][0]["hold"]["kind"] == "drift"
        assert acted(dispatcher) == []
        done = await client.call("approve", workflow_id=wid, approver="alice", gate_step=0)
        assert done.payload["outcome"] == "completed"


async def test_with_the_check_off_the_step_is_sent_as_approved(
    backend_settings: Settings, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    app = build_app(Settings(home=backend_settings.home, drift_check="off"), dispatcher=dispatcher)
    try:
        estate = Estate(dispatcher, tools=True)
        wid = await at_gate(app, actor, [gate(), *restart("web")])
        powered_off_by_someone(estate)
        out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
        assert out["outcome"] == "completed" and acted(dispatcher) == ["power_off_vm:web", "power_on_vm:web"]
    finally:
        app.close()


async def test_hand_back_says_the_check_is_the_agents(app: PilotApp, actor: Actor) -> None:
    wid: str = app.service.create_workflow(
        CreateRequest(actor, "ops", "test", [gate(), *restart("web")])
    ).payload()["workflow_id"]
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    off, on, alarms = out["pending_dispatch"]
    assert list(off)[:4] == ["index", "skill", "tool", "params"], "the contract's keys come first"
    (said,) = off["agent_checks"]
    assert said.startswith("Drift check (yours: Pilot runs without dispatch and reads nothing)")
    assert "read web exists, power_state, tools_status again" in said
    assert "read web exists, power_state again" in on["agent_checks"][0]
    assert "agent_checks" not in alarms, "reads are not checked"


@pytest.mark.slow
async def test_the_drift_is_posted_to_the_webhook(backend_settings: Settings, actor: Actor) -> None:
    dispatcher = ScriptedDispatcher()
    estate = Estate(dispatcher, tools=True)
    with serve(Receiver()) as receiver:
        configured = Settings(home=backend_settings.home, notify_url=receiver.url, notify_timeout=2.0)
        app = build_app(configured, dispatcher=dispatcher)
        try:
            wid = await at_gate(app, actor, [gate(), *restart("web")])
            powered_off_by_someone(estate)
            (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
            got = receiver.wait_for(2)
        finally:
            app.close()
    first, second = (json.loads(g.body) for g in got)
    assert first["event"] == "awaiting_approval"
    assert second["event"] == "drift_detected" and second["step"] == 0
    assert second["gate"]["message"].startswith("DRIFT before step 1 (aiops.power_off_vm)")
    assert second["gate"]["prediction"]["steps"][0]["outcome"] == "no_change"
    assert second["hold"]["details"]["changes"][0]["field"] == "power_state"
