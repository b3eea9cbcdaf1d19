from __future__ import annotations

from typing import Any

import pytest

from tests.support.plans import gate, plan, step
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.safety.review import BLOCKING_KINDS, RUN_BLOCKING_KINDS, blocking_findings, review

CURATED = Catalog.curated()

SUMMARY_KEYS = [
    "total_steps",
    "destructive_steps",
    "write_steps",
    "read_only_steps",
    "classified_steps",
    "unclassified_steps",
    "approval_gates",
    "parallel_groups",
    "est_duration_min",
]


@pytest.fixture(scope="module")
def known(companion_tools: dict[str, Any]) -> Catalog:
    return Catalog.from_snapshot(companion_tools)


def kinds(result: dict[str, Any]) -> list[tuple[str, int]]:
    return [(f["kind"], f["step_index"]) for f in result["findings"]]


# --- result shape, summary, verdict -----------------------------------------------------------


def test_result_and_finding_keys_in_reference_order() -> None:
    wf = plan(step("aiops", "power_off_vm", {"vm_name": "a"}))
    result = review(wf, CURATED)
    assert list(result) == ["workflow_id", "verdict", "findings", "summary"]
    assert result["workflow_id"] == wf.id
    assert list(result["findings"][0]) == ["severity", "kind", "step_index", "message"]
    assert list(result["summary"]) == SUMMARY_KEYS


def test_three_reads_estimate_0_6_minutes_and_are_approved() -> None:
    wf = plan(*(step("monitor", t) for t in ("get_alarms", "get_events", "list_esxi_hosts")))
    result = review(wf, CURATED)
    assert result["verdict"] == "approved"
    assert result["findings"] == []
    assert result["summary"]["read_only_steps"] == 3
    assert result["summary"]["est_duration_min"] == 0.6


def test_one_read_one_destructive_one_gate_estimate_6_7_minutes() -> None:
    wf = plan(
        step("monitor", "investigate_vm", {"vm_name": "a"}),
        gate(),
        step("aiops", "power_off_vm", {"vm_name": "a"}),
    )
    summary = review(wf, CURATED)["summary"]
    assert summary == {
        "total_steps": 3,
        "destructive_steps": 1,
        "write_steps": 0,
        "read_only_steps": 1,
        "classified_steps": 2,
        "unclassified_steps": 0,
        "approval_gates": 1,
        "parallel_groups": 0,
        "est_duration_min": 6.7,
    }


def test_empty_workflow_estimates_half_a_minute() -> None:
    result = review(plan(), CURATED)
    assert result["verdict"] == "approved"
    assert result["summary"]["total_steps"] == 0
    assert result["summary"]["est_duration_min"] == 0.5


def test_groups_and_writes_count_in_summary() -> None:
    wf = plan(
        step("monitor", "get_alarms", group_id="g1"),
        step("monitor", "get_events", group_id="g1"),
        step("aiops", "reconfigure_vm", {"vm_name": "a"}),
        step("custom", "frobnicate", {"x": 1}, action="frob"),
    )
    summary = review(wf, CURATED)["summary"]
    assert summary["parallel_groups"] == 1
    assert summary["write_steps"] == 1
    assert summary["unclassified_steps"] == 1
    assert summary["classified_steps"] == 3
    assert summary["est_duration_min"] == 0.5  # 0.4 reads - 0.5 for the group, floored


def test_only_high_findings_change_the_verdict() -> None:
    low_only = plan(step("monitor", "get_vm_info", {"vm_name": ""}))
    assert [f["severity"] for f in review(low_only, CURATED)["findings"]] == ["low"]
    assert review(low_only, CURATED)["verdict"] == "approved"
    medium_only = plan(
        step("monitor", "get_alarms", group_id="g"),
        step("monitor", "get_events"),
        step("monitor", "list_esxi_hosts", group_id="g"),
    )
    assert [f["severity"] for f in review(medium_only, CURATED)["findings"]] == ["medium"]
    assert review(medium_only, CURATED)["verdict"] == "approved"


def test_statuses_are_ignored() -> None:
    fresh = plan(step("aiops", "power_off_vm", {"vm_name": "a"}))
    done = plan(step("aiops", "power_off_vm", {"vm_name": "a"}, status=StepStatus.SUCCESS))
    assert review(fresh, CURATED)["findings"] == review(done, CURATED)["findings"]


# --- per-step findings ------------------------------------------------------------------------


def test_empty_param_is_low_and_exempts_target_and_description() -> None:
    wf = plan(
        step("monitor", "get_vm_info", {"vm_name": "", "target": "", "description": None, "other": None}),
        gate(),
    )
    wf.steps[1].params["empty"] = ""  # gates are never checked
    findings = review(wf, CURATED)["findings"]
    assert [(f["kind"], f["severity"], f["step_index"]) for f in findings] == [
        ("empty_param", "low", 0),
        ("empty_param", "low", 0),
    ]
    assert "'vm_name'" in findings[0]["message"]
    assert "'other'" in findings[1]["message"]


@pytest.mark.parametrize(
    "value",
    [
        "TODO",
        "REVIEW",
        "FIXME",
        " TODO ",
        "TBD",
        "CHANGEME",
        "TODO: pick a VM",
        "<vm name>",
        "{{vm_name}}",
        "web-{{n}}",
    ],
)
def test_placeholder_values_are_high_findings(value: str) -> None:
    result = review(plan(step("monitor", "get_vm_info", {"vm_name": value})), CURATED)
    assert kinds(result) == [("placeholder_param", 0)]
    assert result["findings"][0]["severity"] == "high"
    assert result["verdict"] == "needs_revision"


@pytest.mark.parametrize(
    "value",
    [
        "review",
        "Review",
        "todo-app",
        "todo",
        "fixme-db",
        "web-01",
        "a <b> c",
        "docker ps --format '{{.Names}}'",
    ],
)
def test_real_names_that_look_like_words_are_not_placeholders(value: str) -> None:
    result = review(plan(step("monitor", "get_vm_info", {"vm_name": value})), CURATED)
    assert result["findings"] == []


def test_placeholder_inside_nested_params_is_found_with_its_path() -> None:
    wf = plan(step("aiops", "create_vm_plan", {"operations": [{"vm_name": "TODO"}]}))
    findings = review(wf, CURATED)["findings"]
    assert kinds({"findings": findings}) == [("placeholder_param", 0)]
    assert "operations[0].vm_name" in findings[0]["message"]


def test_delete_then_use_reported_at_the_later_non_destructive_step() -> None:
    wf = plan(
        gate(),
        step("nsx", "delete_segment", {"segment_id": "web", "target": "nsx1"}),
        step("nsx", "list_segments", {"target": "nsx1"}),
        step("nsx", "create_nat_rule", {"tier1_id": "t1", "segment": "web"}),
        step("nsx", "delete_tier1_gateway", {"tier1_id": "web"}),  # destructive: not a "use"
    )
    result = review(wf, CURATED)
    assert kinds(result) == [("delete_then_use", 3)]
    assert result["findings"][0]["severity"] == "high"
    assert "step 1" in result["findings"][0]["message"]


def test_powering_off_then_on_is_not_a_use_after_delete() -> None:
    wf = plan(
        gate(),
        step("aiops", "power_off_vm", {"vm_name": "a"}),
        step("aiops", "power_on_vm", {"vm_name": "a"}),
    )
    assert review(wf, CURATED)["findings"] == []


def test_delete_then_use_needs_an_identity_key_and_a_value() -> None:
    wf = plan(
        gate(),
        step("aiops", "delete_vm", {"vm_name": "", "comment": "web"}),
        step("monitor", "get_vm_info", {"vm_name": "", "x": "web"}),
    )
    assert [k for k, _ in kinds(review(wf, CURATED))] == ["empty_param", "empty_param"]


# --- gates and groups -------------------------------------------------------------------------


def test_ungated_destructive_and_unclassified_until_the_first_gate() -> None:
    wf = plan(
        step("aiops", "reconfigure_vm", {"vm_name": "a"}),  # writes are never required to be gated
        step("aiops", "power_off_vm", {"vm_name": "a"}),
        step("custom", "frobnicate", {"x": 1}),
        gate(),
        step("aiops", "delete_vm", {"vm_name": "b"}),
        step("custom", "frobnicate_more", {"x": 1}),
    )
    result = review(wf, CURATED)
    assert kinds(result) == [("ungated_destructive", 1), ("ungated_unclassified", 2)]
    assert "'high'" in result["findings"][0]["message"]


def test_group_findings_non_contiguous_and_destructive_members_even_when_gated() -> None:
    wf = plan(
        gate(),
        step("monitor", "get_alarms", group_id="g1"),
        step("monitor", "get_events"),
        step("aiops", "power_off_vm", {"vm_name": "a"}, group_id="g1"),
        step("monitor", "get_alarms", group_id="g2"),
        step("monitor", "get_events", group_id="g2"),
    )
    result = review(wf, CURATED)
    assert kinds(result) == [("non_contiguous_group", 1), ("destructive_in_parallel_group", 3)]
    assert [f["severity"] for f in result["findings"]] == ["medium", "high"]


def test_findings_come_per_step_then_ungated_then_groups() -> None:
    wf = plan(
        step("custom", "frobnicate", {"x": "TODO"}),
        step("aiops", "power_off_vm", {"vm_name": ""}, group_id="g"),
        step("aiops", "delete_vm", {"vm_name": "a"}),
        step("monitor", "get_vm_info", {"vm_name": "a"}, group_id="g"),
    )
    assert kinds(review(wf, CURATED)) == [
        ("placeholder_param", 0),
        ("empty_param", 1),
        ("delete_then_use", 3),
        ("ungated_destructive", 1),
        ("ungated_destructive", 2),
        ("ungated_unclassified", 0),
        ("non_contiguous_group", 1),
        ("destructive_in_parallel_group", 1),
    ]


# --- against the real tools of a skill -------------------------------------------------------


def test_unknown_tool_names_the_closest_real_tools(known: Catalog) -> None:
    result = review(plan(gate(), step("aiops", "power_on", {"vm_name": "a"})), known)
    assert kinds(result) == [("unknown_tool", 1)]
    finding = result["findings"][0]
    assert finding["severity"] == "high"
    assert "'power_on_vm'" in finding["message"]
    assert "catalog refresh" in finding["message"]


def test_unknown_rollback_tool_is_found(known: Catalog) -> None:
    wf = plan(
        gate(),
        step(
            "nsx",
            "create_segment",
            {"segment_id": "s", "display_name": "S", "transport_zone_path": "/tz"},
            rollback_tool="remove_segment",
            rollback_params={"segment_id": "s"},
        ),
    )
    result = review(wf, known)
    assert kinds(result) == [("unknown_tool", 1)]
    assert "'remove_segment'" in result["findings"][0]["message"]
    assert "'delete_segment'" in result["findings"][0]["message"]


def test_tools_are_not_checked_for_skills_without_a_known_tool_list(known: Catalog) -> None:
    wf = plan(gate(), step("debug", "plan_cases", {"case": "c1"}))
    assert review(wf, known)["findings"] == []
    assert review(plan(gate(), step("aiops", "power_on", {"vm_name": "a"})), CURATED)["findings"] == []


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({}, "missing required parameter 'vm_name'"),
        ({"vm_name": "a", "confirm": True}, "unknown parameter 'confirm'"),
        ({"vm_name": 7}, "'vm_name' must be of type string"),
        ({"vm_name": "a", "target": 3}, "'target' must be string or null"),
    ],
)
def test_invalid_params_names_the_problem_and_the_fix(
    known: Catalog, params: dict[str, Any], problem: str
) -> None:
    result = review(plan(gate(), step("aiops", "power_on_vm", params)), known)
    assert kinds(result) == [("invalid_params", 1)]
    message = result["findings"][0]["message"]
    assert problem in message
    assert "power_on_vm takes" in message and "vm_name (required)" in message


def test_step_and_secret_references_count_as_valid(known: Catalog) -> None:
    wf = plan(
        step("aiops", "create_vm_plan", {"operations": [{"vm_name": "a"}]}),
        gate(),
        step(
            "aiops",
            "apply_vm_plan",
            {"plan_id": "__from_step_0__:plan_id", "target": "__from_step_0__:target", "confirm": True},
            rollback_tool="rollback_vm_plan",
            rollback_params={"plan_id": "__from_step_0__:plan_id", "confirm": True},
        ),
        step(
            "aiops",
            "run_vm_guest_command",
            {
                "vm_name": "a",
                "command": "/bin/true",
                "username": "root",
                "password": {"$env": "GUEST_PW"},
                "confirm": True,
            },
        ),
        step("aiops", "create_vm_plan", {"operations": "__from_step_0__"}),
    )
    assert review(wf, known)["findings"] == []


def test_invalid_rollback_params_are_found(known: Catalog) -> None:
    wf = plan(
        gate(),
        step(
            "aiops",
            "power_on_vm",
            {"vm_name": "a"},
            rollback_tool="power_off_vm",
            rollback_params={"name": "a"},
        ),
    )
    result = review(wf, known)
    assert kinds(result) == [("invalid_params", 1)]
    assert "rollback_params" in result["findings"][0]["message"]
    assert "missing required parameter 'vm_name'" in result["findings"][0]["message"]


def test_invalid_params_message_never_shows_the_value(known: Catalog) -> None:
    wf = plan(
        gate(),
        step(
            "aiops",
            "run_vm_guest_command",
            {"vm_name": "a", "command": "x", "username": "u", "password": 98765431},
        ),
    )
    result = review(wf, known)
    assert kinds(result) == [("invalid_params", 1)]
    assert "98765431" not in result["findings"][0]["message"]
    assert "'password' must be of type string" in result["findings"][0]["message"]


# --- blocking -----------------------------------------------------------------------------------


def test_blocking_kinds_and_run_blocking_findings(known: Catalog) -> None:
    assert (
        frozenset({"ungated_destructive", "ungated_unclassified", "destructive_in_parallel_group"})
        == BLOCKING_KINDS
    )
    assert (
        BLOCKING_KINDS
        | {
            "unknown_tool",
            "invalid_params",
            "write_in_parallel_group",
            "bad_step_reference",
            "bad_gate_option",
        }
        == RUN_BLOCKING_KINDS
    )
    wf = plan(
        step("monitor", "get_vm_info", {"vm_name": "TODO"}),
        step("aiops", "power_off_vm", {"vm_name": "a"}),
        step("aiops", "power_on", {"vm_name": "a"}),
    )
    result = review(wf, known)
    assert [(f["kind"], f["step_index"]) for f in blocking_findings(result)] == [
        ("unknown_tool", 2),
        ("ungated_destructive", 1),
        ("ungated_unclassified", 2),
    ]
    assert [f["kind"] for f in blocking_findings(result, BLOCKING_KINDS)] == [
        "ungated_destructive",
        "ungated_unclassified",
    ]


def test_only_reads_may_share_a_parallel_group(known: Catalog) -> None:
    wf = plan(
        step("monitor", "get_alarms", {}, group_id="g"),
        step("aiops", "power_on_vm", {"vm_name": "a"}, group_id="g"),
        step("monitor", "get_events", {}, group_id="g"),
    )
    result = review(wf, known)
    kinds = [(f["kind"], f["step_index"], f["severity"]) for f in result["findings"]]
    assert ("write_in_parallel_group", 1, "high") in kinds
    assert not any(k == "write_in_parallel_group" and i != 1 for k, i, _ in kinds)
    assert [f["kind"] for f in blocking_findings(result)] == ["write_in_parallel_group"]
    assert result["verdict"] == "needs_revision"
