"""The acknowledgement aiops' delete_vm wants echoed from its preview (``engine.acknowledge``), in
process: a confirmed delete without one gets the gate's preview's ``acknowledge_with``; a step
that carries one, a preview call, another tool, or no preview leave the params as they are."""

from __future__ import annotations

from typing import Any

from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import Inspection
from vmware_pilot.engine.acknowledge import gate_preview, with_echo

ACK = {"instance_uuid": "5012-abcd", "disk_count": 1, "snapshot_count": 0}
PREVIEW = {
    "status": "previewed",
    "summary": "delete DC0_H0_VM1",
    "payload": {"action": "preview", "blast_radius": {"vm": "DC0_H0_VM1", "acknowledge_with": ACK}},
}


def delete(**extra: Any) -> dict[str, Any]:
    return {"vm_name": "DC0_H0_VM1", "confirm": True, "target": "lab", **extra}


def test_a_confirmed_delete_gets_the_preview_s_acknowledgement_unchanged() -> None:
    sent = with_echo("aiops", "delete_vm", delete(), PREVIEW)
    assert sent == delete(acknowledge_blast_radius=ACK)
    assert sent["acknowledge_blast_radius"] is not ACK  # a copy: the stored preview is not shared


def test_what_is_left_as_it_is() -> None:
    mine = {"instance_uuid": "other", "disk_count": 2, "snapshot_count": 1}
    assert with_echo("aiops", "delete_vm", delete(acknowledge_blast_radius=mine), PREVIEW) == delete(
        acknowledge_blast_radius=mine
    )
    preview_call = {**delete(), "confirm": False}
    assert with_echo("aiops", "delete_vm", preview_call, PREVIEW) == preview_call
    assert with_echo("aiops", "power_off_vm", delete(), PREVIEW) == delete()
    assert with_echo("aiops", "delete_vm", delete(), None) == delete()
    unmeasured = {"payload": {"blast_radius": {"acknowledge_with": None, "unmeasured": ["disks"]}}}
    assert with_echo("aiops", "delete_vm", delete(), unmeasured) == delete()
    assert with_echo("aiops", "delete_vm", delete(), {"status": "failed", "payload": "boom"}) == delete()


def test_the_preview_is_the_one_the_gate_before_the_step_showed() -> None:
    gate = Step(0, "require_approval", "pilot", "approve", {"message": "Go?"}, status=StepStatus.PENDING)
    steps = [
        gate,
        Step(1, "delete", "aiops", "delete_vm", delete()),
        Step(2, "on", "aiops", "power_on_vm", {"vm_name": "DC0_H0_VM1"}),
    ]
    wf = Workflow(id="wf-1", workflow_type="adhoc", _state=WorkflowState.AWAITING_APPROVAL, steps=steps)
    assert gate_preview(wf, 1) is None  # not inspected yet
    wf.inspections[0] = Inspection(previews={"1": PREVIEW})
    assert gate_preview(wf, 1) == PREVIEW and gate_preview(wf, 2) is None
    assert gate_preview(wf, 0) is None  # no gate before the first step
