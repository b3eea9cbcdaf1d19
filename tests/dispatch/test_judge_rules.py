"""``dispatch.judge`` as a list of rules: each rule fires and stays quiet where it should, and the
rule list judges every answer of tests/data/rules/judge.yaml as the hand-written judge of 2.4.x did."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from tests.support.tables import mismatches, rows
from vmware_pilot.dispatch.judge import JUDGE_RULES, answer_of, judge
from vmware_pilot.dispatch.protocol import OutcomeKind


def result(value: Any, *, is_error: bool = False, structured: Any = None) -> CallToolResult:
    body = value if isinstance(value, str) else json.dumps(value)
    return CallToolResult(
        content=[TextContent(type="text", text=body)], is_error=is_error, structured_content=structured
    )


GUEST = ("aiops", "run_vm_guest_command_with_output")
PLAIN = ("monitor", "get_alarms")

# rule name -> (an answer it decides, with the kind it gives; an answer it leaves to others)
CASES: dict[str, tuple[tuple[str, str], CallToolResult, OutcomeKind, tuple[str, str], CallToolResult]] = {
    "guest_timed_out": (
        GUEST,
        result({"timed_out": True, "exit_code": 0}),
        OutcomeKind.EFFECT_UNKNOWN,
        PLAIN,
        result({"timed_out": True, "exit_code": -1}),
    ),
    "preview_only": (
        PLAIN,
        result("{}", structured={"action": "preview"}),
        OutcomeKind.PREVIEW_ONLY,
        PLAIN,
        result({"action": "applied"}),
    ),
    "is_error": (
        PLAIN,
        result("boom", is_error=True),
        OutcomeKind.FAILED,
        PLAIN,
        result("boom"),
    ),
    "error_key": (
        PLAIN,
        result({"error": "no such VM"}),
        OutcomeKind.FAILED,
        PLAIN,
        result({"error": ""}),
    ),
    "lone_error_item": (
        PLAIN,
        result([{"error": "no such VM"}]),
        OutcomeKind.FAILED,
        PLAIN,
        result([{"error": "no such VM"}, {"ok": True}]),
    ),
    "guest_exit_code": (
        GUEST,
        result({"exit_code": 3, "stderr": "denied"}),
        OutcomeKind.FAILED,
        PLAIN,
        result({"exit_code": 3, "stderr": "denied"}),
    ),
}


def test_every_rule_has_cases_and_a_docstring() -> None:
    assert [r.name for r in JUDGE_RULES] == list(CASES)
    assert all(r.doc.strip() for r in JUDGE_RULES)


@pytest.mark.parametrize("rule", JUDGE_RULES, ids=lambda r: r.name)
def test_rule_fires_on_its_case_and_not_on_the_other(rule: Any) -> None:
    fires_on, fires, kind, quiet_on, quiet = CASES[rule.name]
    outcome = rule(answer_of(*fires_on, fires))
    assert outcome is not None
    assert outcome.kind is kind
    assert judge(*fires_on, fires).kind is kind
    assert rule(answer_of(*quiet_on, quiet)) is None


# --- the table: answers and the outcome the hand-written judge of 2.4.x gave them ------------------
def answer(row: dict[str, Any]) -> tuple[str, str, CallToolResult]:
    """The skill's answer a row describes: its text parts, error flag and structured content."""
    content = [TextContent(type="text", text=t) for t in row["texts"]]
    res = CallToolResult(content=content, is_error=row["is_error"], structured_content=row["structured"])
    return row["skill"], row["tool"], res


def judged(row: dict[str, Any]) -> dict[str, Any]:
    outcome = judge(*answer(row))
    return {"kind": outcome.kind.value, "payload": outcome.payload, "message": outcome.message}


def test_each_answer_is_judged_as_the_table_says() -> None:
    assert not mismatches(rows("judge.yaml"), judged, lambda row: row["judged"])
