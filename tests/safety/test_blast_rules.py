"""``safety.blast`` previews as lists of rules: each rule gives its part of the answer where it
should and an empty part where it should not, and the rule lists preview every workflow exactly
as the hand-written previews did (``frozen_blast``): same keys in the same order, same values."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.equivalence import EXAMPLES, frozen_blast
from tests.support.plans import gate, plan, step
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.blast import (
    CANCEL_RULES,
    ROLLBACK_RULES,
    Preview,
    cancel_blast_radius,
    rollback_blast_radius,
)
from vmware_pilot.templates.steps import gate_step, make_step

CURATED = Catalog.curated()
S, W = StepStatus, WorkflowState


def _power_off(status: StepStatus, rollback: str = "power_on_vm") -> Step:
    return step("aiops", "power_off_vm", {"vm_name": "a"}, rollback_tool=rollback, status=status)


def _clone(status: StepStatus) -> Step:
    return step("aiops", "clone_vm", {"new_name": "c"}, rollback_tool="power_off_vm", status=status)


def _gave_something(fragment: dict[str, Any]) -> bool:
    """A part of a preview says something: a non-empty list or note, or a true flag."""
    return any(v not in ([], "", False, 0) for v in fragment.values())


# rule name -> (a workflow it reports on, one it has nothing to say about)
CASES: dict[str, tuple[Workflow, Workflow]] = {
    "unknown_effects": (plan(_power_off(S.RUNNING)), plan(_power_off(S.SUCCESS))),
    "unmeasured": (plan(_power_off(S.INTERRUPTED)), plan(_power_off(S.SUCCESS))),
    "would_roll_back": (plan(_power_off(S.SUCCESS)), plan(_power_off(S.SUCCESS, rollback=""))),
    "left_in_place": (
        plan(_power_off(S.SUCCESS, rollback="")),
        plan(step("monitor", "get_alarms", status=S.SUCCESS), gate(S.SUCCESS)),
    ),
    "not_reversed_by_pilot": (
        plan(_power_off(S.NOT_EXECUTED)),
        plan(_power_off(S.NOT_EXECUTED, rollback="")),
    ),
    "not_reversible_outside_pilot": (
        plan(_power_off(S.REPORTED_DONE, rollback="")),
        plan(step("monitor", "get_alarms", status=S.REPORTED_DONE)),
    ),
    "left_behind_by_earlier_rollback": (
        plan(_clone(S.PARTIALLY_ROLLED_BACK)),
        plan(_clone(S.ROLLED_BACK)),
    ),
    "not_reversible_outside_pilot_note": (
        plan(_power_off(S.NOT_EXECUTED, rollback="")),
        plan(_power_off(S.NOT_EXECUTED)),
    ),
    "rollback_blocked": (
        plan(_power_off(S.SUCCESS), state=W.COMPLETED),
        plan(_power_off(S.SUCCESS), state=W.FAILED),
    ),
    "left_in_place_by_cancel": (
        plan(_power_off(S.SUCCESS)),
        plan(step("monitor", "get_alarms", status=S.SUCCESS)),
    ),
    "performed_outside_pilot": (plan(_power_off(S.REPORTED_DONE)), plan(_power_off(S.NOT_EXECUTED))),
    "would_skip": (plan(_power_off(S.PENDING)), plan(_power_off(S.SKIPPED))),
    "handed_out_to_caller": (plan(_power_off(S.NOT_EXECUTED)), plan(_power_off(S.REPORTED_DONE))),
    "cancel_blocked": (
        plan(_power_off(S.SUCCESS), state=W.FAILED),
        plan(_power_off(S.SUCCESS), state=W.RUNNING),
    ),
}
# Parts every preview has whatever the workflow: checked for their value instead.
ALWAYS: dict[str, Callable[[Workflow], dict[str, Any]]] = {
    "workflow": lambda wf: {"workflow": {"id": wf.id, "type": wf.workflow_type, "state": wf.state.value}},
    "state_after_rollback": lambda wf: {"state_after": "failed"},
    "state_after_cancel": lambda wf: {"state_after": "cancelled"},
}


def test_every_rule_has_cases_and_a_docstring() -> None:
    names = {r.name for r in (*ROLLBACK_RULES, *CANCEL_RULES)}
    assert names == set(CASES) | set(ALWAYS)
    assert all(r.doc.strip() for r in (*ROLLBACK_RULES, *CANCEL_RULES))


@pytest.mark.parametrize(
    "rule", sorted({*ROLLBACK_RULES, *CANCEL_RULES}, key=lambda r: r.name), ids=lambda r: r.name
)
def test_rule_reports_its_case_and_not_the_other(rule: Any) -> None:
    if rule.name in ALWAYS:
        for wf in (plan(state=W.FAILED), plan(_power_off(S.SUCCESS), state=W.RUNNING, name="other")):
            assert rule(Preview(wf, CURATED, False)) == ALWAYS[rule.name](wf)
        return
    reports, quiet = CASES[rule.name]
    assert _gave_something(rule(Preview(reports, CURATED, False)))
    assert not _gave_something(rule(Preview(quiet, CURATED, False)))


# --- differential: the rule lists against the frozen hand-written previews ---------------------
_STATUSES = st.sampled_from([*StepStatus, "weird"])
_TOOLS = [
    ("aiops", "power_off_vm", "power_on_vm"),
    ("aiops", "power_off_vm", ""),
    ("aiops", "clone_vm", "delete_vm"),
    ("aiops", "clone_vm", "power_off_vm"),
    ("vmware-aiops", "deploy_vm_from_ova", "power_off_vm"),
    ("aiops", "batch_clone_vms", "delete_vm"),
    ("monitor", "get_alarms", ""),
    ("monitor", "get_alarms", "undo_it"),
    ("custom", "do_thing", ""),
    ("custom", "do_thing", "undo_thing"),
]


@st.composite
def _steps(draw: st.DrawFn) -> Step:
    if draw(st.integers(0, 6)) == 0:
        s = gate_step(0, "Proceed?")
    else:
        skill, tool, rollback = draw(st.sampled_from(_TOOLS))
        params = draw(
            st.sampled_from([{}, {"vm_name": "a"}, {"new_name": "n", "vm_name": "a"}, {"new_name": ""}])
        )
        rb_params = draw(st.sampled_from([{}, {"vm_name": "a"}, {"password": "hunter2", "vm_name": "a"}]))
        s = make_step(0, tool, skill, tool, params, rollback, rb_params if rollback else None)
    s.status = draw(_STATUSES)  # type: ignore[assignment]
    return s


@st.composite
def workflows(draw: st.DrawFn) -> Workflow:
    wf = plan(*draw(st.lists(_steps(), max_size=2 * 16 + 3)), state=draw(st.sampled_from(list(W))))
    n = len(wf.steps)
    wf.rollback_results = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "step": st.integers(0, max(n - 1, 0)),
                    "status": st.sampled_from(["unknown", "success", "failed"]),
                }
            ),
            max_size=3,
        )
    )
    return wf


@EXAMPLES
@given(workflows(), st.booleans())
def test_rules_preview_exactly_as_the_frozen_previews(wf: Workflow, ack: bool) -> None:
    for new_preview, old_preview in (
        (rollback_blast_radius, frozen_blast.rollback_blast_radius),
        (cancel_blast_radius, frozen_blast.cancel_blast_radius),
    ):
        new = new_preview(wf, CURATED, acknowledge_unknown_effects=ack)
        old = old_preview(wf, CURATED, acknowledge_unknown_effects=ack)
        assert new == old
        assert json.dumps(new) == json.dumps(old)  # key order too
