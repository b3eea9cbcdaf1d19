"""The workflow state machine as data, and the one function that changes a workflow's state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmware_pilot.domain.enums import Event, WorkflowState
from vmware_pilot.errors import InvalidTransition

if TYPE_CHECKING:
    from vmware_pilot.domain.model import Workflow

__all__ = ["TRANSITIONS", "allowed_events", "fire", "next_state"]

S = WorkflowState
E = Event

_CANCELLABLE = (S.DRAFT, S.PENDING, S.RUNNING, S.AWAITING_APPROVAL, S.ROLLING_BACK)
_ROLLBACKABLE = (S.PENDING, S.RUNNING, S.AWAITING_APPROVAL, S.FAILED)

TRANSITIONS: dict[tuple[WorkflowState, Event], WorkflowState] = {
    (S.DRAFT, E.CONFIRM): S.PENDING,
    (S.PENDING, E.START_RUN): S.RUNNING,
    # A run that died (or a run restarted by run_workflow) resumes from 'running'.
    (S.RUNNING, E.START_RUN): S.RUNNING,
    (S.RUNNING, E.REACH_GATE): S.AWAITING_APPROVAL,
    (S.RUNNING, E.HAND_BACK): S.PENDING,
    (S.RUNNING, E.COMPLETE): S.COMPLETED,
    (S.RUNNING, E.FAIL): S.FAILED,
    (S.PENDING, E.DETECT_CRASH): S.FAILED,
    (S.RUNNING, E.DETECT_CRASH): S.FAILED,
    (S.AWAITING_APPROVAL, E.DETECT_CRASH): S.FAILED,
    (S.AWAITING_APPROVAL, E.APPROVE): S.RUNNING,
    **{(s, E.START_ROLLBACK): S.ROLLING_BACK for s in _ROLLBACKABLE},
    (S.ROLLING_BACK, E.FINISH_ROLLBACK): S.FAILED,
    **{(s, E.CANCEL): S.CANCELLED for s in _CANCELLABLE},
}


def next_state(state: WorkflowState, event: Event) -> WorkflowState | None:
    """The state ``event`` leads to from ``state``, or None when the table has no such edge."""
    return TRANSITIONS.get((state, event))


def allowed_events(state: WorkflowState) -> list[Event]:
    return [e for (s, e) in TRANSITIONS if s is state]


def fire(wf: Workflow, event: Event) -> WorkflowState:
    """Apply ``event`` to ``wf``; raise InvalidTransition when the table forbids it."""
    target = next_state(wf.state, event)
    if target is None:
        raise InvalidTransition(wf.id, wf.state.value, event.value)
    wf._set_state(target)
    return target
