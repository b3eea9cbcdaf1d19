"""``safety.review`` as lists of rules: every finding kind is one named rule, each rule fires and
stays quiet where it should, and the rules review every plan of tests/data/rules/review.yaml as
the hand-written review of 2.4.x did: same findings in the same order with the same texts, same
summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import DATA
from tests.support.plans import gate, plan, review_plan, step
from tests.support.tables import mismatches, rows
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.review import FINDING_KINDS, REVIEW_RULES, review
from vmware_pilot.templates.steps import gate_step

CURATED = Catalog.curated()
KNOWN = Catalog.from_snapshot(json.loads((DATA / "companion-tools.json").read_text()))


def _gate_with(**options: Any) -> Step:
    return gate_step(0, "Proceed?", **options)


def _ref(text: str) -> Step:
    return step("monitor", "get_vm_info", {"vm_name": text})


# rule name (= the kind it reports) -> (a plan it reports, a plan it does not)
CASES: dict[str, tuple[Workflow, Workflow]] = {
    "empty_param": (
        plan(step("monitor", "get_alarms", {"severity": ""})),
        plan(step("monitor", "get_alarms", {"target": "", "description": None})),
    ),
    "placeholder_param": (
        plan(step("monitor", "investigate_vm", {"vm_name": "<vm name>"})),
        plan(step("monitor", "investigate_vm", {"vm_name": "review"})),
    ),
    "delete_then_use": (
        plan(
            gate(),
            step("aiops", "delete_vm", {"vm_name": "a"}),
            step("monitor", "investigate_vm", {"vm_name": "a"}),
        ),
        plan(
            gate(),
            step("aiops", "power_off_vm", {"vm_name": "a"}),
            step("aiops", "power_on_vm", {"vm_name": "a"}),
        ),
    ),
    "unknown_tool": (
        plan(step("monitor", "get_alarmz")),
        plan(step("monitor", "get_alarms")),
    ),
    "invalid_params": (
        plan(step("monitor", "get_alarms", {"no_such_param": 1})),
        plan(step("monitor", "get_alarms")),
    ),
    "ungated_destructive": (
        plan(step("aiops", "delete_vm", {"vm_name": "a"})),
        plan(gate(), step("aiops", "delete_vm", {"vm_name": "a"})),
    ),
    "ungated_unclassified": (
        plan(step("custom", "do_thing")),
        plan(gate(), step("custom", "do_thing")),
    ),
    "non_contiguous_group": (
        plan(
            step("monitor", "get_alarms", group_id="g"),
            step("monitor", "get_events"),
            step("monitor", "list_esxi_hosts", group_id="g"),
        ),
        plan(step("monitor", "get_alarms", group_id="g"), step("monitor", "get_events", group_id="g")),
    ),
    "destructive_in_parallel_group": (
        plan(gate(), step("aiops", "delete_vm", {"vm_name": "a"}, group_id="g")),
        plan(gate(), step("aiops", "power_on_vm", {"vm_name": "a"}, group_id="g")),
    ),
    "write_in_parallel_group": (
        plan(gate(), step("aiops", "power_on_vm", {"vm_name": "a"}, group_id="g")),
        plan(step("monitor", "get_alarms", group_id="g"), step("monitor", "get_events", group_id="g")),
    ),
    "bad_step_reference": (
        plan(_ref("__from_step_3__")),
        plan(step("monitor", "get_alarms"), _ref("__from_step_0__:name")),
    ),
    "bad_gate_option": (
        plan(_gate_with(expires_in_minutes=0), step("monitor", "get_alarms")),
        plan(_gate_with(expires_in_minutes=30, approvals_required=2), step("monitor", "get_alarms")),
    ),
}


def test_every_finding_kind_is_one_rule_with_a_docstring() -> None:
    assert sorted(r.name for r in REVIEW_RULES) == sorted(FINDING_KINDS) == sorted(CASES)
    assert all(r.doc.strip() for r in REVIEW_RULES)


@pytest.mark.parametrize("name", list(CASES))
def test_rule_reports_its_case_and_not_the_other(name: str) -> None:
    reports, quiet = CASES[name]
    assert name in {f["kind"] for f in review(reports, KNOWN)["findings"]}
    assert name not in {f["kind"] for f in review(quiet, KNOWN)["findings"]}


# --- the table: plans and the reviews the hand-written code of 2.4.x gave them -------------------
def reviewed(row: dict[str, Any]) -> dict[str, Any]:
    return review(review_plan(row), {"curated": CURATED, "known": KNOWN}[row["catalog"]])


def test_each_plan_is_reviewed_as_the_table_says() -> None:
    assert not mismatches(rows("review.yaml"), reviewed, lambda row: row["review"])
