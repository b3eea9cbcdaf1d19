"""Workflow states, step statuses and the events that move a workflow between states."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GATE_ACTION", "TERMINAL_STATES", "Event", "Outcome", "StepStatus", "WorkflowState"]

GATE_ACTION = "require_approval"


class WorkflowState(StrEnum):
    DRAFT = "draft"
    PENDING = "pending"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    ROLLING_BACK = "rolling_back"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({WorkflowState.COMPLETED, WorkflowState.FAILED, WorkflowState.CANCELLED})


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_EXECUTED = "not_executed"
    REPORTED_DONE = "reported_done"
    INTERRUPTED = "interrupted"
    ROLLED_BACK = "rolled_back"
    PARTIALLY_ROLLED_BACK = "partially_rolled_back"


class Event(StrEnum):
    """What happens to a workflow; the transition table maps (state, event) to the next state."""

    CONFIRM = "confirm"  # draft confirmed
    START_RUN = "start_run"  # run_workflow / approve begins walking steps
    REACH_GATE = "reach_gate"  # a pending require_approval step is reached
    HAND_BACK = "hand_back"  # walk ended with steps handed to the caller
    COMPLETE = "complete"  # every step done
    FAIL = "fail"  # a step failed or its effect is unknown
    DETECT_CRASH = "detect_crash"  # a step left 'running' by a dead process was found
    APPROVE = "approve"  # the pending gate was approved
    START_ROLLBACK = "start_rollback"
    FINISH_ROLLBACK = "finish_rollback"
    CANCEL = "cancel"


class Outcome(StrEnum):
    COMPLETED = "completed"
    AWAITING_APPROVAL = "awaiting_approval"
    DISPATCH_REQUIRED = "dispatch_required"
    FAILED = "failed"
    CANCELLED = "cancelled"
