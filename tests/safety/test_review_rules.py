"""``safety.review`` as lists of rules: every finding kind is one named rule, each rule fires and
stays quiet where it should, and the rules review every plan exactly as the hand-written review
did (``frozen_review``): same findings in the same order with the same texts, same summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.equivalence import EXAMPLES, frozen_review
from tests.support.plans import gate, plan, step
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.review import FINDING_KINDS, REVIEW_RULES, review
from vmware_pilot.templates.steps import gate_step, make_step

CURATED = Catalog.curated()
KNOWN = Catalog.from_snapshot(
    json.loads((Path(__file__).parents[1] / "data" / "companion-tools.json").read_text())
)


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


# --- differential: the rule lists against the frozen hand-written review ----------------------
_TOOLS = [
    ("aiops", "delete_vm"),
    ("aiops", "power_off_vm"),
    ("aiops", "power_on_vm"),
    ("aiops", "clone_vm"),
    ("aiops", "remove_snapshot"),
    ("aiops", "delete_vms_typo"),
    ("monitor", "get_alarms"),
    ("monitor", "investigate_vm"),
    ("nsx", "delete_segment"),
    ("vdi", "reset_vdi_machine"),
    ("debug", "plan_case"),
    ("custom", "do_thing"),
]
_VALUES = st.sampled_from(
    [
        "",
        None,
        "web-01",
        "web-02",
        "TODO",
        "review",
        "<vm name>",
        "{{vm}}",
        "TODO: x",
        "__from_step_0__",
        "__from_step_5__:id",
        "__from_step_1__:name",
        3,
        True,
        ["TBD", "web-01"],
        {"a": "CHANGEME"},
    ]
)
_PARAMS = st.dictionaries(
    st.sampled_from(["vm_name", "name", "new_name", "target", "description", "segment_id", "force", "x"]),
    _VALUES,
    max_size=4,
)
_GATE_OPTIONS = st.dictionaries(
    st.sampled_from(["expires_in_minutes", "approvals_required"]),
    st.sampled_from([0, 1, 2, 30, "x", None, True, 10_000_000]),
    max_size=2,
)


@st.composite
def _steps(draw: st.DrawFn) -> Step:
    group = draw(st.sampled_from(["", "", "g1", "g2"]))
    if draw(st.integers(0, 5)) == 0:
        s = gate_step(0, "Proceed?", **draw(_GATE_OPTIONS))
        s.group_id = group
        return s
    skill, tool = draw(st.sampled_from(_TOOLS))
    rollback = draw(st.sampled_from(["", "", "power_on_vm", "delete_vm", "undo_it"]))
    return make_step(
        0,
        draw(st.sampled_from(["", "remove it", "step"])) or tool,
        skill,
        tool,
        draw(_PARAMS),
        rollback,
        draw(_PARAMS) if rollback else None,
        group,
    )


@st.composite
def plans(draw: st.DrawFn) -> Workflow:
    steps = draw(st.lists(_steps(), max_size=8))
    wf = plan(*steps)
    if steps and draw(st.booleans()):  # indices need not match positions in an old record
        wf.steps[draw(st.integers(0, len(steps) - 1))].index = draw(st.integers(0, 9))
    return wf


@EXAMPLES
@given(plans(), st.sampled_from([CURATED, KNOWN]))
def test_rules_review_exactly_as_the_frozen_review(wf: Workflow, catalog: Catalog) -> None:
    new, old = review(wf, catalog), frozen_review.review(wf, catalog)
    assert new == old
    assert json.dumps(new) == json.dumps(old)  # key order too
