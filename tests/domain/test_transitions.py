from __future__ import annotations

import itertools

import pytest

from vmware_pilot.domain.enums import Event, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.transitions import TRANSITIONS, allowed_events, fire
from vmware_pilot.errors import InvalidTransition

S = WorkflowState
E = Event

# The expected table, written out by hand from docs/contract.md#workflow-states so a change to
# TRANSITIONS fails here.
EXPECTED = {
    (S.DRAFT, E.CONFIRM): S.PENDING,
    (S.DRAFT, E.CANCEL): S.CANCELLED,
    (S.PENDING, E.START_RUN): S.RUNNING,
    (S.PENDING, E.DETECT_CRASH): S.FAILED,
    (S.PENDING, E.START_ROLLBACK): S.ROLLING_BACK,
    (S.PENDING, E.CANCEL): S.CANCELLED,
    (S.RUNNING, E.START_RUN): S.RUNNING,
    (S.RUNNING, E.REACH_GATE): S.AWAITING_APPROVAL,
    (S.RUNNING, E.HAND_BACK): S.PENDING,
    (S.RUNNING, E.COMPLETE): S.COMPLETED,
    (S.RUNNING, E.FAIL): S.FAILED,
    (S.RUNNING, E.DETECT_CRASH): S.FAILED,
    (S.RUNNING, E.START_ROLLBACK): S.ROLLING_BACK,
    (S.RUNNING, E.CANCEL): S.CANCELLED,
    (S.AWAITING_APPROVAL, E.APPROVE): S.RUNNING,
    (S.AWAITING_APPROVAL, E.DETECT_CRASH): S.FAILED,
    (S.AWAITING_APPROVAL, E.START_ROLLBACK): S.ROLLING_BACK,
    (S.AWAITING_APPROVAL, E.CANCEL): S.CANCELLED,
    (S.ROLLING_BACK, E.FINISH_ROLLBACK): S.FAILED,
    (S.ROLLING_BACK, E.CANCEL): S.CANCELLED,
    (S.FAILED, E.START_ROLLBACK): S.ROLLING_BACK,
}


def test_table_is_exactly_the_reference_state_machine() -> None:
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("state", "event"), list(itertools.product(S, E)))
def test_every_state_event_pair_moves_or_raises(state: WorkflowState, event: Event) -> None:
    wf = Workflow.new("t", state)
    if (state, event) in EXPECTED:
        assert fire(wf, event) is EXPECTED[(state, event)]
        assert wf.state is EXPECTED[(state, event)]
    else:
        with pytest.raises(InvalidTransition) as info:
            fire(wf, event)
        assert wf.state is state, "a refused transition must not change the state"
        assert info.value.fields["state"] == state.value
        assert info.value.hint


def test_terminal_states_have_no_way_out_but_rollback_from_failed() -> None:
    assert allowed_events(S.COMPLETED) == []
    assert allowed_events(S.CANCELLED) == []
    assert allowed_events(S.FAILED) == [E.START_ROLLBACK]
