"""The gate's prediction as tables over tools x states x orders (``tests/data/prediction-cases.yaml``):
each released step's outcome, reason and changes, judged against the state the plan leaves at that
point, and one verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.records import Inspection
from vmware_pilot.results import Prediction
from vmware_pilot.safety.predict import predict, verdict_key

CASES = yaml.safe_load((Path(__file__).parents[1] / "data" / "prediction-cases.yaml").read_text())


def plan(rows: list[list[Any]]) -> list[Step]:
    gate = Step(0, "require_approval", "pilot", "approve", {"message": "Go?"}, status=StepStatus.PENDING)
    return [
        gate,
        *(Step(i, tool, skill, tool, dict(params)) for i, (skill, tool, params) in enumerate(rows, 1)),
    ]


def run(case: dict[str, Any]) -> Prediction:
    steps = plan(case["steps"])
    inspection = None
    if case.get("targets") is not None:
        targets = [{"target": "", **t} for t in case["targets"]]
        previews = {str(k): v for k, v in (case.get("previews") or {}).items()}
        inspection = Inspection(targets=targets, previews=previews)
    return predict(steps[1:], steps, inspection, Catalog(), note=case.get("note", ""))


def shown(value: Any) -> str:
    return str(value)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_prediction(case: dict[str, Any]) -> None:
    got = run(case)
    assert [s.outcome for s in got.steps] == case["outcomes"], [(s.outcome, s.reason) for s in got.steps]
    assert got.verdict == case["verdict"], got.summary
    assert [s.step for s in got.steps] == list(range(1, len(case["steps"]) + 1))
    if "changes" in case:
        said = [
            f"{s.step}: {c.object} {c.field} {shown(c.before)} -> {shown(c.after)}"
            for s in got.steps
            for c in s.changes
        ]
        assert said == case["changes"]
    for index, text in (case.get("reasons") or {}).items():
        reason = got.steps[index - 1].reason
        assert text in reason, reason
    if "summary" in case:
        assert got.summary == case["summary"]
    if "summary_has" in case:
        assert case["summary_has"] in got.summary, got.summary
    if got.verdict == "fails":
        first = next(s for s in got.steps if s.outcome in ("fails", "refused"))
        assert got.failing_step == first.step and first.reason in got.summary
    else:
        assert got.failing_step is None


def test_no_step_is_judged_alone_against_the_state_before_the_plan() -> None:
    """The issue's false alert: a power-on after the plan's own power-off is a change, not a no-op."""
    (case,) = [c for c in CASES if c["name"].startswith("rolling restart of a VM that is on, with Tools")]
    got = run(case)
    on = got.steps[1]
    assert on.outcome == "succeeds" and "already" not in on.reason.lower()
    first = on.changes[0]
    assert (first.field, first.before, first.after) == ("power_state", "poweredOff", "poweredOn")


def test_the_verdict_key_follows_outcomes_not_wording() -> None:
    (case,) = [c for c in CASES if c["name"].startswith("rolling restart of a VM without VMware Tools")]
    refused = run(case)
    worded = Prediction.model_validate({**refused.model_dump(), "summary": "other words"})
    assert verdict_key(worded) == verdict_key(refused) == "fails|1:refused,2:unknown,3:unknown"
    running = [{**case["targets"][0], "tools_status": "guestToolsRunning"}]
    clean = {1: {"status": "previewed", "summary": "ok", "blockers": []}}
    fixed = run({**case, "targets": running, "previews": clean})
    assert fixed.verdict == "succeeds" and verdict_key(fixed) != verdict_key(refused)
    assert verdict_key(None) == ""


def test_the_prediction_reads_nothing_but_its_arguments() -> None:
    """Pure: the same arguments give the same prediction, and the arguments are left as they were."""
    (case,) = [c for c in CASES if c["name"].startswith("snapshots created")]
    steps = plan(case["steps"])
    inspection = Inspection(targets=[{"target": "", **t} for t in case["targets"]])
    before = repr(inspection), [s.to_dict() for s in steps]
    first = predict(steps[1:], steps, inspection, Catalog())
    assert predict(steps[1:], steps, inspection, Catalog()) == first
    assert (repr(inspection), [s.to_dict() for s in steps]) == before


def test_a_reference_to_a_step_that_ran_is_predicted_with_the_value_it_carries() -> None:
    found = Step(
        0, "find", "monitor", "list_virtual_machines", {}, status=StepStatus.SUCCESS, result={"vm": "vm0"}
    )
    gate = Step(1, "require_approval", "pilot", "approve", {"message": "Go?"})
    on = Step(2, "on", "aiops", "power_on_vm", {"vm_name": "__from_step_0__:vm"})
    snap = Step(
        3, "snap", "aiops", "create_vm_snapshot", {"vm_name": "vm0", "snapshot_name": "__from_step_2__:id"}
    )
    steps = [found, gate, on, snap]
    vm0 = {"kind": "vm", "name": "vm0", "target": "", "read": "ok", "summary": {"power_state": "poweredOff"}}
    got = predict(steps[2:], steps, Inspection(targets=[{**vm0, "snapshots": []}]), Catalog())
    assert got.steps[0].outcome == "succeeds" and got.steps[0].changes[0].object == "vm0"
    # A value only a released step's result will carry is shown as what it will carry.
    assert got.steps[1].outcome == "succeeds"
    (snapshot,) = got.steps[1].changes
    assert snapshot.after == ["the id of step 2's result (aiops.power_on_vm)"]
