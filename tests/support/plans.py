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
