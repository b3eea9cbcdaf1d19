"""The policy's pure rules: parsing, matching (as a table), strictest approval rule, windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import REPO
from vmware_pilot.policy.load import policy_from_text, read_policy_file
from vmware_pilot.policy.model import (
    EMPTY,
    ApprovalRule,
    Match,
    PolicyInvalid,
    Subject,
    denials,
    is_open,
    next_opening,
    parse_policy,
    strictest,
)

EXAMPLE = REPO / "docs" / "policies.example.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load((REPO / "tests" / "data" / "policy-matching.yaml").read_text())


def _subject(raw: dict[str, Any]) -> Subject:
    return Subject(raw["skill"], raw["tool"], tuple(raw["targets"]), raw["tier"])


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_a_rule_matches_a_step_as_the_table_says(case: dict[str, Any]) -> None:
    policy = parse_policy({"deny": [{"match": case["match"], "reason": "r"}]})
    assert policy.deny[0].match.matches(_subject(case["step"])) is case["matches"]


def test_the_issue_example_loads_and_means_what_its_comments_say() -> None:
    policy = read_policy_file(EXAMPLE)
    delete = Subject("aiops", "delete_vm", ("prod-web",), "destructive")
    [(rule, _)] = denials(policy, delete)
    assert rule.reason == "VMs are deleted through the CMDB, not by agents"
    assert denials(policy, Subject("aiops", "power_off_vm", ("prod-web",), "write")) == []
    found = strictest(policy.approvals, [Subject("aiops", "delete_vm_snapshot", ("prod-db",), "destructive")])
    assert found is not None
    approval = found[0]
    assert (approval.quorum, approval.approvers, approval.requester_may_approve) == (2, ("operator",), False)
    assert approval.max_validity_minutes == 240
    assert (
        strictest(policy.approvals, [Subject("aiops", "delete_vm_snapshot", ("lab-1",), "destructive")])
        is None
    )
    # the year-end freeze holds prod-* from 2026-12-20 00:00 +01:00 to 2027-01-04 00:00 +01:00
    assert is_open(policy.windows, "prod-web", datetime(2026, 12, 19, 22, 59, tzinfo=UTC))
    assert not is_open(policy.windows, "prod-web", datetime(2026, 12, 19, 23, 0, tzinfo=UTC))
    assert not is_open(policy.windows, "prod-web", datetime(2027, 1, 3, 22, 59, tzinfo=UTC))
    assert is_open(policy.windows, "prod-web", datetime(2027, 1, 3, 23, 0, tzinfo=UTC))
    # reads are never held
    assert is_open(
        policy.windows,
        Subject("aiops", "get_vm_info", ("prod-web",), "read"),
        datetime(2026, 12, 25, tzinfo=UTC),
    )
    # lab-* may change on Saturdays and Sundays from 06:00 to 18:00 Berlin time (UTC+1 in winter)
    wednesday = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
    assert not is_open(policy.windows, "lab-1", wednesday)
    assert next_opening(policy.windows, "lab-1", wednesday) == datetime(2026, 12, 5, 5, 0, tzinfo=UTC)
    assert is_open(policy.windows, "lab-1", datetime(2026, 12, 6, 16, 59, tzinfo=UTC))
    assert not is_open(policy.windows, "lab-1", datetime(2026, 12, 6, 17, 0, tzinfo=UTC))
    # in summer Berlin is UTC+2
    assert is_open(policy.windows, "lab-1", datetime(2026, 7, 4, 4, 0, tzinfo=UTC))
    assert not is_open(policy.windows, "lab-1", datetime(2026, 7, 4, 3, 59, tzinfo=UTC))
    # a target no window names is always open
    assert is_open(policy.windows, "dev-1", wednesday)
    assert policy.conflicts.mode == "refuse"


def test_next_opening_skips_a_blackout_inside_a_change_window_and_is_none_when_never() -> None:
    policy = parse_policy(
        {
            "windows": [
                {
                    "name": "nights",
                    "match": {"target": "db-*"},
                    "weekly": [{"days": ["mon", "tue", "wed", "thu", "fri"], "from": "22:00", "to": "02:00"}],
                },
                {
                    "name": "freeze",
                    "blackout": True,
                    "match": {"target": "db-*"},
                    "dates": [{"from": "2026-12-07T00:00:00Z", "to": "2026-12-09T00:00:00Z"}],
                },
                {
                    "name": "gone",
                    "match": {"target": "old-*"},
                    "dates": [{"from": "2020-01-01", "to": "2020-01-02"}],
                },
            ]
        }
    )
    monday = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    # Monday and Tuesday night are frozen; the freeze ends Wednesday 00:00 inside Tuesday's night window
    assert next_opening(policy.windows, "db-1", monday) == datetime(2026, 12, 9, 0, 0, tzinfo=UTC)
    assert is_open(
        policy.windows, "db-1", datetime(2026, 12, 10, 1, 59, tzinfo=UTC)
    )  # Wednesday's night, into Thursday
    assert not is_open(policy.windows, "db-1", datetime(2026, 12, 10, 2, 0, tzinfo=UTC))
    assert next_opening(policy.windows, "old-1", monday) is None
    opened = next_opening(policy.windows, "db-1", datetime(2026, 12, 10, 2, 0, tzinfo=UTC))
    assert opened == datetime(2026, 12, 10, 22, 0, tzinfo=UTC)


def test_the_strictest_matching_rule_wins_and_ties_go_to_the_first() -> None:
    rules = [
        ApprovalRule("one", Match(risk=("destructive",)), quorum=1, requester_may_approve=False),
        ApprovalRule("two", Match(targets=("prod-*",)), quorum=2),
        ApprovalRule("two-short", Match(targets=("prod-*",)), quorum=2, max_validity_minutes=30),
        ApprovalRule("three-elsewhere", Match(targets=("lab-*",)), quorum=3),
    ]
    step = Subject("aiops", "delete_vm", ("prod-1",), "destructive")
    found = strictest(rules, [step])
    assert found is not None and found[0].name == "two-short"
    tie = [ApprovalRule("a", Match(), quorum=2), ApprovalRule("b", Match(), quorum=2)]
    found = strictest(tie, [step])
    assert found is not None and found[0].name == "a"
    assert strictest(rules, [Subject("aiops", "get_vm_info", ("dev",), "read")]) is None


def test_equal_meaning_has_equal_digest() -> None:
    a = policy_from_text("deny:\n  - match: {tool: aiops.vm_delete}\n    reason: not here\n")
    b = policy_from_text("# comment\ndeny: [{reason: not here, match: {tool: [aiops.delete_vm]}}]\n")
    assert a.digest == b.digest
    assert a.digest != EMPTY.digest
    assert policy_from_text("") == EMPTY


def test_errors_name_their_lines() -> None:
    text = (
        "deny:\n"
        "  - match: {tool: aiops.delete_vm}\n"
        "    reason: 3\n"
        "approvals:\n"
        "  - quorum: 0\n"
        "windows:\n"
        "  - name: w\n"
        "    timezone: Mars/Olympus\n"
        "    weekly: [{days: [funday], from: '06:00', to: '18:00'}]\n"
        "conflicts: {mode: maybe}\n"
    )
    with pytest.raises(PolicyInvalid) as caught:
        policy_from_text(text)
    got = [(p.line, p.where()) for p in caught.value.problems]
    assert got == [
        (3, "deny[0].reason"),
        (5, "approvals[0].quorum"),
        (8, "windows[0].timezone"),
        (9, "windows[0].weekly[0].days"),
        (10, "conflicts.mode"),
    ]
    with pytest.raises(PolicyInvalid) as caught:
        policy_from_text("deny:\n  - match: {tool: x\n")
    assert caught.value.problems[0].line is not None


def test_a_missing_file_is_the_empty_policy(tmp_path: Path) -> None:
    assert read_policy_file(tmp_path / "policies.yaml") == EMPTY


def test_windows_refuse_a_naive_time() -> None:
    with pytest.raises(ValueError):
        is_open((), "x", datetime(2026, 1, 1) + timedelta(0))
