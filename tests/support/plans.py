"""Small builders for safety tests: workflows made through the one step door (templates.steps)."""

from __future__ import annotations

from typing import Any

from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.templates.steps import gate_step, make_step


def step(
    skill: str,
    tool: str,
    params: dict[str, Any] | None = None,
    *,
    action: str = "",
    rollback_tool: str = "",
    rollback_params: dict[str, Any] | None = None,
    group_id: str = "",
    status: StepStatus = StepStatus.PENDING,
) -> Step:
    s = make_step(0, action or tool, skill, tool, params, rollback_tool, rollback_params, group_id)
    s.status = status
    return s


def gate(status: StepStatus = StepStatus.PENDING) -> Step:
    s = gate_step(0, "Proceed?")
    s.status = status
    return s


def plan(*steps: Step, state: WorkflowState = WorkflowState.PENDING, name: str = "custom-plan") -> Workflow:
    """A workflow of ``steps`` with their indices set to their positions."""
    for i, s in enumerate(steps):
        s.index = i
    return Workflow.new(name, state, list(steps))


# --- workflows described by a row of a rule table (tests/data/rules/) -----------------------------
_STATUSES = {s.value for s in StepStatus}


def blast_workflow(row: dict[str, Any]) -> Workflow:
    """The workflow a row of blast.yaml describes: steps with their statuses, state, rollback results."""
    steps = []
    for d in row["steps"]:
        if d.get("gate"):
            s = gate_step(0, "Proceed?")
        else:
            rollback = d.get("rollback_tool", "")
            s = make_step(
                0, d["tool"], d["skill"], d["tool"], d["params"], rollback, d.get("rollback_params")
            )
        s.status = StepStatus(d["status"]) if d["status"] in _STATUSES else d["status"]  # or an unknown one
        steps.append(s)
    wf = plan(*steps, state=WorkflowState(row["state"]))
    wf.id = "wf-table"
    wf.rollback_results = [dict(r) for r in row["rollback_results"]]
    return wf


def review_plan(row: dict[str, Any]) -> Workflow:
    """The plan a row of review.yaml describes (``renumber``: one step's index off its position, as
    in an old record)."""
    steps = []
    for d in row["steps"]:
        if "gate" in d:
            s = gate_step(0, "Proceed?", **d["gate"])
            s.group_id = d.get("group_id", "")
        else:
            s = make_step(
                0,
                d["action"],
                d["skill"],
                d["tool"],
                d["params"],
                d.get("rollback_tool", ""),
                d.get("rollback_params"),
                d.get("group_id", ""),
            )
        steps.append(s)
    wf = plan(*steps)
    if "renumber" in row:
        wf.steps[row["renumber"]["position"]].index = row["renumber"]["index"]
    wf.id = "wf-table"
    return wf
