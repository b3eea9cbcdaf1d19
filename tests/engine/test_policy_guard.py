"""engine/guard.py: a step as rules see it, and the approval demand (stricter of the recorded and
the current rule) judged at a time the test passes in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.records import GateRecord
from vmware_pilot.engine import guard
from vmware_pilot.policy.load import policy_from_text
from vmware_pilot.templates.steps import steps_from_dicts

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "go?"}}
DELETE = {
    "action": "delete",
    "skill": "vmware-aiops",
    "tool": "vm_delete",
    "params": {"vm_name": "prod-web", "target": "vc-prod", "confirm": True},
}
POLICY = """\
approvals:
  - name: short
    match: {target: "vc-*"}
    max_validity_minutes: 60
  - name: two
    match: {risk: destructive, target: "prod-*"}
    quorum: 2
    approvers: [operator]
"""


def _workflow() -> Workflow:
    return Workflow.new(
        "t", WorkflowState.AWAITING_APPROVAL, steps_from_dicts([GATE, DELETE]), created_by="carol"
    )


def test_a_step_as_rules_see_it() -> None:
    subject = guard.subject_of(_workflow().steps[1], Catalog.curated())
    assert subject.tier == "destructive"
    assert set(subject.targets) == {"prod-web", "vc-prod"}
    assert subject.names[0] == "aiops.delete_vm"


def test_the_strictest_rule_names_the_gate_and_the_demand_is_the_stricter_of_two() -> None:
    wf = _workflow()
    policy = policy_from_text(POLICY)
    rule = guard.gate_rule(policy, wf, 0, Catalog.curated())
    assert rule is not None and rule.rule == "two" and rule.step_index == 1
    short = guard.GateRule("short", 1, (), True, 60.0, "d", 1, ())
    demand = guard.demand_of(rule, short)
    assert (demand.quorum, demand.max_validity_minutes, demand.requester_may_approve) == (2, 60.0, True)
    assert guard.GateRule.from_record(rule.record()) == rule


def test_validity_roles_and_requester_are_judged_at_the_time_given() -> None:
    wf = _workflow()
    reached = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    record = GateRecord(index=0, reached_at=reached)
    gate = wf.steps[0]
    rule = guard.GateRule("r", 1, ("operator",), False, 60.0, "d", 1, ())
    demand = guard.demand_of(rule, None)
    operator = Actor("olga", kind="oidc", role="viewer", groups=("operator",))
    assert (
        guard.approval_refusal(
            demand, wf, gate, operator, operator.label, reached + timedelta(minutes=59), record
        )
        is None
    )
    late = guard.approval_refusal(
        demand, wf, gate, operator, operator.label, reached + timedelta(minutes=60), record
    )
    assert late is not None and late.fields["refused"] == "gate_expired"
    admin = Actor("ann", kind="token", role="admin")
    wrong = guard.approval_refusal(demand, wf, gate, admin, admin.label, reached, record)
    assert wrong is not None and wrong.fields["refused"] == "policy_approvers"
    carol = Actor("carol", kind="os", role="operator")
    own = guard.approval_refusal(demand, wf, gate, carol, "carol", reached, record)
    assert own is not None and own.fields["refused"] == "policy_requester"
