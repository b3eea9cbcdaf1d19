"""The gate's prediction through the engine and the MCP tools: ``prediction`` in
get_workflow_status while a gate waits, the audit trail of what the approver was told, approving
despite a failing prediction only with a reason, and approvals bound to the prediction."""

from __future__ import annotations

import pytest

from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import connect
from tests.support.prediction import TOOLS_DOWN, Estate, at_gate, gate, restart
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, CancelRequest
from vmware_pilot.errors import StateRefused
from vmware_pilot.results import StatusView, undeclared_keys


async def test_status_carries_the_prediction_while_the_gate_waits(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    status = dapp.service.get_workflow_status(wid).payload()
    prediction = status["prediction"]
    assert prediction["verdict"] == "fails" and prediction["failing_step"] == 1
    assert [(s["step"], s["outcome"]) for s in prediction["steps"]] == [
        (1, "refused"),
        (2, "unknown"),
        (3, "unknown"),
    ]
    assert prediction["steps"][0]["reason"] == f"aiops refuses it: {TOOLS_DOWN}"
    assert [list(s) for s in prediction["steps"]] == [
        ["step", "skill", "tool", "outcome", "reason", "changes", "source"]
    ] * 3
    assert {s["source"] for s in prediction["steps"]} == {"model"}  # no capture: nothing rehearsed
    assert "rehearsal" not in prediction
    typed = StatusView.model_validate(status)
    assert list(undeclared_keys(typed)) == [] and typed.prediction is not None
    assert list(status)[-2:] == ["prediction", "decision"], "added after the record's own keys"
    assert status["decision"]["verdict"] == "fails" and status["decision"]["failing_step"] == 1
    # The audit trail says what the approver was shown.
    (inspected,) = [e for e in status["audit_log"] if e["action"] == "gate_inspected"]
    assert inspected["detail"].startswith(
        "Gate at step 0: FAILS at step 1 (aiops.power_off_vm): aiops refuses"
    )
    # Not at a gate: no prediction.
    (await dapp.service.cancel_workflow(CancelRequest(actor, wid, confirm=True))).payload()
    assert "prediction" not in dapp.service.get_workflow_status(wid).payload()


async def test_the_gate_view_puts_the_verdict_first_and_no_alert_under_the_power_on(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    view = dapp.service.pending_gate(wid).payload()
    assert view["alerts"][0].startswith(
        "FAILS at step 1 (aiops.power_off_vm): aiops refuses it: VMware Tools"
    )
    assert not any(a.startswith("Step 2 ") or "ALREADY" in a for a in view["alerts"]), view["alerts"]


async def test_a_vm_that_is_off_is_powered_on_and_the_gate_shows_it_as_a_change(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher, power="poweredOff")
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    prediction = dapp.service.get_workflow_status(wid).payload()["prediction"]
    assert prediction["verdict"] == "succeeds"
    off, on, _ = prediction["steps"]
    assert off["outcome"] == "no_change" and "is poweredOff already" in off["reason"]
    assert on["outcome"] == "succeeds"
    assert on["changes"][0] == {
        "object": "web",
        "field": "power_state",
        "before": "poweredOff",
        "after": "poweredOn",
    }
    assert prediction["summary"] == "SUCCEEDS: approving leaves web powered on."


async def test_approving_a_failing_prediction_takes_a_reason_recorded_with_the_approval(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    with pytest.raises(StateRefused) as refused:
        (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert refused.value.fields["refused"] == "predicted_failure"
    assert refused.value.fields["failing_step"] == 1 and "acknowledge_predicted_failure" in refused.value.hint
    with pytest.raises(StateRefused):
        (
            await dapp.service.approve(
                ApproveRequest(actor, wid, approver="alice", acknowledge_failure="   ")
            )
        ).payload()
    assert dapp.service.get_workflow_status(wid).payload()["state"] == "awaiting_approval", "nothing changed"

    out = (
        await dapp.service.approve(
            ApproveRequest(
                actor, wid, approver="alice", acknowledge_failure="checking aiops' refusal on purpose"
            )
        )
    ).payload()
    assert out["outcome"] == "failed" and out["steps"][1]["status"] == "failed"
    (approval,) = dapp.service.get_workflow_status(wid).payload()["gates"][0]["approvals"]
    assert approval["acknowledged_failure"] == "checking aiops' refusal on purpose"
    assert approval["verdict"] == "fails|1:refused,2:unknown,3:unknown"
    audit = {e["action"]: e["detail"] for e in out["audit_log"]}
    assert "Reason given: checking aiops' refusal on purpose" in audit["approved_despite_predicted_failure"]
    assert "prediction shown: FAILS at step 1 (aiops.power_off_vm)" in audit["approved"]


async def test_a_succeeding_prediction_needs_no_acknowledgment_and_records_none(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher, tools=True)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    out = (
        await dapp.service.approve(
            ApproveRequest(actor, wid, approver="alice", acknowledge_failure="not needed")
        )
    ).payload()
    assert out["outcome"] == "completed"
    (approval,) = dapp.service.get_workflow_status(wid).payload()["gates"][0]["approvals"]
    assert approval["verdict"].startswith("succeeds|") and "acknowledged_failure" not in approval


async def test_an_approval_stops_counting_when_a_later_inspection_changes_the_prediction(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    estate = Estate(dispatcher, tools=True)
    wid = await at_gate(dapp, actor, [gate(approvals_required=2), *restart("web")])
    first = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert first["approvals_missing"] == 1
    estate.power = "poweredOff"  # someone powered it off: the power-off now has nothing to do
    shown = (await dapp.service.show_gate(actor, wid)).payload()
    assert [s["outcome"] for s in shown["prediction"]["steps"]] == ["no_change", "succeeds", "succeeds"]
    assert shown["gate"]["approvals"] == [] and shown["gate"]["approvals_missing"] == 2
    status = dapp.service.get_workflow_status(wid).payload()
    (voided,) = [e for e in status["audit_log"] if e["action"] == "approvals_voided"]
    assert "alice" in voided["detail"] and "no longer count" in voided["detail"]
    # The same prediction shown again keeps the approvals given for it.
    again = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert again["approvals_missing"] == 1
    (await dapp.service.show_gate(actor, wid)).payload()
    assert dapp.service.pending_gate(wid).payload()["gate"]["approvals_missing"] == 1
    done = (await dapp.service.approve(ApproveRequest(actor, wid, approver="bob"))).payload()
    assert done["outcome"] == "completed"


async def test_the_approve_tool_takes_the_acknowledgment_and_refuses_as_a_result(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    Estate(dispatcher)
    wid = await at_gate(dapp, actor, [gate(), *restart("web")])
    async with connect(dapp) as client:
        status = await client.status(wid)
        assert status["prediction"]["verdict"] == "fails"
        refusal = await client.refused("approve", workflow_id=wid, approver="alice")
        assert refusal["refused"] == "predicted_failure" and "FAILS at step 1" in refusal["error"]
        ran = await client.call(
            "approve", workflow_id=wid, approver="alice", acknowledge_predicted_failure="seen, go"
        )
        assert ran.payload["outcome"] == "failed"
        approvals = (await client.status(wid))["gates"][0]["approvals"]
        assert approvals[0]["acknowledged_failure"] == "seen, go"


async def test_the_approval_form_shows_the_verdict_first_and_takes_the_persons_reason_not_the_agents(
    backend_settings: Settings, actor: Actor
) -> None:
    from tests.support.approval_gates import Person, session

    dispatcher = ScriptedDispatcher()
    Estate(dispatcher)
    app = build_app(Settings(home=backend_settings.home, approvals="elicit"), dispatcher=dispatcher)
    try:
        wid = await at_gate(app, actor, [gate(), *restart("web")])
        silent = Person({"decision": "approve", "approver": "carol"})
        async with session(app, silent) as client:
            refusal = await client.refused(
                "approve", workflow_id=wid, acknowledge_predicted_failure="the agent says it is fine"
            )
        assert refusal["refused"] == "predicted_failure"
        (form,) = silent.forms
        assert form.message.index("Prediction: FAILS at step 1") < form.message.index("It releases:")
        assert "predicted refused: aiops refuses it: VMware Tools" in form.message
        assert "despite" in form.requested_schema["properties"]
        says = Person({"decision": "approve", "approver": "carol", "despite": "carol checked aiops' answer"})
        async with session(app, says) as client:
            await client.call("approve", workflow_id=wid)
            (approval,) = (await client.status(wid))["gates"][0]["approvals"]
        assert (approval["approver"], approval["channel"]) == ("carol", "elicit")
        assert approval["acknowledged_failure"] == "carol checked aiops' answer"
    finally:
        app.close()
