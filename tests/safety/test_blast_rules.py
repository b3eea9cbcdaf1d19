"""``safety.blast`` previews as lists of rules: each rule gives its part of the answer where it
should and an empty part where it should not, and the rule lists preview every workflow of
tests/data/rules/blast.yaml as the hand-written previews of 2.4.x did: same keys in the same order,
same values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.plans import blast_workflow, gate, plan, step
from tests.support.tables import mismatches, rows
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.blast import (
    CANCEL_RULES,
    ROLLBACK_RULES,
    BlastInput,
    cancel_blast_radius,
    rollback_blast_radius,
)

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
            assert rule(BlastInput(wf, CURATED, False)) == ALWAYS[rule.name](wf)
        return
    reports, quiet = CASES[rule.name]
    assert _gave_something(rule(BlastInput(reports, CURATED, False)))
    assert not _gave_something(rule(BlastInput(quiet, CURATED, False)))


# --- the table: workflows and the previews the hand-written code of 2.4.x gave them ---------------
@pytest.mark.parametrize("name", ["rollback", "cancel"])
def test_each_workflow_is_previewed_as_the_table_says(name: str) -> None:
    preview = {"rollback": rollback_blast_radius, "cancel": cancel_blast_radius}[name]

    def previewed(row: dict[str, Any]) -> dict[str, Any]:
        ack = row["acknowledge_unknown_effects"]
        return preview(blast_workflow(row), CURATED, acknowledge_unknown_effects=ack)

    assert not mismatches(rows("blast.yaml"), previewed, lambda row: row[name])
