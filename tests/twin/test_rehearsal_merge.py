"""The prediction with a rehearsal on a twin (``safety.predict.with_rehearsal``), in process: the
rehearsed steps take the twin's outcomes (``source: rehearsal``), the verdict is drawn again, a
disagreement with the model is said, an approval binds to the rehearsal's digest, and a rehearsal
that could not run leaves the gate ``unknown`` when one is required."""

from __future__ import annotations

from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.records import Inspection
from vmware_pilot.engine.decision import decision_lines, rehearsal_summary
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.results import Decision
from vmware_pilot.safety.predict import predict, verdict_key, with_rehearsal

VM = "DC0_H0_VM0"
TOOLS_DOWN = "power_off_vm refused: VMware Tools is not running in the guest"


def restart() -> list[Step]:
    gate = Step(0, "require_approval", "pilot", "approve", {"message": "Go?"}, status=StepStatus.PENDING)
    off = Step(1, "off", "aiops", "power_off_vm", {"vm_name": VM, "force": False, "confirm": True})
    on = Step(2, "on", "aiops", "power_on_vm", {"vm_name": VM})
    return [gate, off, on]


def inspection() -> Inspection:
    target = {
        "kind": "vm",
        "target": "",
        "name": VM,
        "read": "ok",
        "summary": {"power_state": "poweredOn"},
        "tools_status": "guestToolsRunning",
    }
    return Inspection(targets=[target])


def rehearsal(steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "status": "rehearsed",
        "verdict": "fails" if any(s["outcome"] in ("fails", "refused") for s in steps) else "succeeds",
        "reason": "",
        "digest": "sha256:" + "ab" * 32,
        "capture": {
            "id": "lab-1",
            "target": "lab",
            "vcenter": "127.0.0.1:1",
            "age_hours": 1.5,
            "stale": False,
        },
        "steps": steps,
        "diff": [],
        **extra,
    }


def model() -> Any:
    steps = restart()
    return predict(steps[1:], steps, inspection(), Catalog())


def test_a_refusal_on_the_twin_overrides_the_model_and_is_said_as_a_disagreement() -> None:
    before = model()
    assert before.verdict == "succeeds" and {s.source for s in before.steps} == {"model"}
    ran = rehearsal(
        [
            {"step": 1, "skill": "aiops", "tool": "power_off_vm", "outcome": "refused", "answer": TOOLS_DOWN},
            {"step": 2, "skill": "aiops", "tool": "power_on_vm", "outcome": "not_reached", "answer": ""},
        ]
    )
    got = with_rehearsal(before, ran)
    off, on = got.steps
    assert (off.outcome, off.source) == ("refused", "rehearsal")
    assert off.reason == f"On the twin, aiops answered: {TOOLS_DOWN}"
    assert (on.outcome, on.source) == ("unknown", "rehearsal") and on.reason.startswith("Not reached")
    assert got.verdict == "fails" and got.failing_step == 1
    assert (
        "The rehearsal disagrees with the model: step 1 (aiops.power_off_vm): the model predicted succeeds"
        in got.summary
    )
    assert got.rehearsal is not None and got.rehearsal.disagreements
    assert verdict_key(got).endswith("|rehearsal:sha256:" + "ab" * 32)
    assert verdict_key(got) != verdict_key(before)
    # The gate says so: an alert for the disagreement, and the rehearsal in one line with the capture's age.
    view = GateView.model_validate(
        {
            "workflow_id": "w",
            "workflow_type": "custom",
            "state": "awaiting_approval",
            "prediction": got.model_dump(mode="json"),
        }
    )
    assert any(a.startswith("The rehearsal on a twin disagrees with the model") for a in view.alerts())
    assert view.rehearsal_line().startswith(
        "Rehearsal on a twin: FAILS (capture lab-1 of 127.0.0.1:1, 1.5 h old)"
    )


def test_a_rehearsal_that_agrees_keeps_the_model_changes_and_a_stale_capture_is_flagged() -> None:
    ran = rehearsal(
        [
            {
                "step": 1,
                "skill": "aiops",
                "tool": "power_off_vm",
                "outcome": "succeeds",
                "answer": "powered_off",
            },
            {
                "step": 2,
                "skill": "aiops",
                "tool": "power_on_vm",
                "outcome": "succeeds",
                "answer": "powered on",
            },
        ],
        capture={"id": "lab-1", "target": "lab", "vcenter": "127.0.0.1:1", "age_hours": 30.0, "stale": True},
    )
    got = with_rehearsal(model(), ran)
    assert got.verdict == "succeeds" and [s.source for s in got.steps] == ["rehearsal", "rehearsal"]
    assert got.steps[0].changes[0].after == "poweredOff"
    assert got.rehearsal is not None and got.rehearsal.disagreements == []
    assert "The capture is 30.0 h old: stale." in got.summary
    view = GateView.model_validate(
        {
            "workflow_id": "w",
            "workflow_type": "custom",
            "state": "awaiting_approval",
            "prediction": got.model_dump(mode="json"),
        }
    )
    assert "The twin's capture is 30.0 h old (stale)." in view.alerts()
    assert "STALE" in view.rehearsal_line()


def test_a_rehearsal_that_could_not_run_is_unknown_when_required_and_noted_when_auto() -> None:
    failed = {
        "status": "unknown",
        "verdict": "unknown",
        "reason": "the twin could not run: no simulator",
        "digest": "sha256:00",
    }
    required = with_rehearsal(model(), failed, required=True)
    assert (
        required.verdict == "unknown"
        and "could not run: the twin could not run: no simulator" in required.summary
    )
    assert [s.source for s in required.steps] == ["model", "model"]
    auto = with_rehearsal(model(), failed)
    assert auto.verdict == "succeeds" and "Not rehearsed on a twin: the twin could not run" in auto.summary
    assert with_rehearsal(model(), None) == model()


def test_the_decision_summary_says_the_rehearsal_with_its_capture_age_on_every_surface() -> None:
    refused = [
        {"step": 1, "skill": "aiops", "tool": "power_off_vm", "outcome": "refused", "answer": TOOLS_DOWN},
        {"step": 2, "skill": "aiops", "tool": "power_on_vm", "outcome": "not_reached", "answer": ""},
    ]
    got = with_rehearsal(model(), rehearsal(refused))
    line = rehearsal_summary(got)
    assert line.startswith("Rehearsed on a twin: fails (capture of 127.0.0.1:1, 1.5 h old)")
    assert "the model said otherwise: step 1 (aiops.power_off_vm)" in line
    stale = rehearsal(refused, capture={"id": "x", "vcenter": "vc", "age_hours": 30.0, "stale": True})
    assert "30.0 h old, STALE" in rehearsal_summary(with_rehearsal(model(), stale))
    failed = rehearsal([], status="unknown", verdict="unknown", reason="the simulator did not start")
    assert rehearsal_summary(with_rehearsal(model(), failed)) == (
        "Not rehearsed on a twin (capture of 127.0.0.1:1, 1.5 h old): the simulator did not start"
    )
    assert rehearsal_summary(model()) == ""
    # The CLI panel, the elicitation form and chat messages draw their lines from the summary.
    decision = Decision(workflow_id="w", gate=0, verdict="fails", verdict_summary=got.summary, rehearsal=line)
    lines = decision_lines(decision)
    assert lines[lines.index(next(x for x in lines if x.startswith("Verdict:"))) + 1] == line
