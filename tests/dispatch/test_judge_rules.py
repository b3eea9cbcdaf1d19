"""``dispatch.judge`` as a list of rules: each rule fires and stays quiet where it should, and the
rule list judges every answer exactly as the hand-written judge of 2.4.x did (``frozen_judge``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.types import CallToolResult, TextContent

from tests.equivalence import EXAMPLES, frozen_judge
from vmware_pilot.dispatch.judge import JUDGE_RULES, answer_of, judge
from vmware_pilot.dispatch.protocol import OutcomeKind


def result(value: Any, *, is_error: bool = False, structured: Any = None) -> CallToolResult:
    body = value if isinstance(value, str) else json.dumps(value)
    return CallToolResult(
        content=[TextContent(type="text", text=body)], isError=is_error, structuredContent=structured
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


# --- differential: the rule list against the frozen hand-written judge ------------------------
_PAIRS = [
    ("error", "boom"),
    ("error", ""),
    ("error", None),
    ("error", {}),
    ("action", "preview"),
    ("action", "applied"),
    ("timed_out", True),
    ("timed_out", False),
    ("exit_code", 0),
    ("exit_code", 2),
    ("exit_code", -1),
    ("exit_code", True),
    ("stderr", "denied"),
    ("vm", "web-01"),
]
_objects = st.lists(st.sampled_from(_PAIRS), max_size=3).map(dict)
_payloads = st.recursive(
    st.one_of(st.none(), st.sampled_from(["boom", "preview", 0]), _objects),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.builds(lambda v: {"result": v}, inner)),
    max_leaves=4,
)


@st.composite
def answers(draw: st.DrawFn) -> tuple[str, str, CallToolResult]:
    skill = draw(st.sampled_from(["aiops", "vmware-aiops", "monitor", "nsx"]))
    tool = draw(st.sampled_from(["run_vm_guest_command", "run_vm_guest_command_with_output", "power_on_vm"]))
    texts = draw(
        st.lists(
            st.one_of(_payloads.map(json.dumps), st.sampled_from(["plain", "", "  ", "{not json"])),
            max_size=3,
        )
    )
    structured = draw(st.one_of(st.none(), _objects, st.builds(lambda v: {"result": v}, _payloads)))
    res = CallToolResult(
        content=[TextContent(type="text", text=t) for t in texts],
        isError=draw(st.booleans()),
        structuredContent=structured,
    )
    return skill, tool, res


@EXAMPLES
@given(answers())
def test_rules_judge_exactly_as_the_frozen_judge(answer: tuple[str, str, CallToolResult]) -> None:
    new = judge(*answer)
    old = frozen_judge.judge(*answer)
    assert (new.kind, new.payload, new.message) == (old.kind, old.payload, old.message)
