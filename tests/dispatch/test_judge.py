"""Judging a skill's answer and extracting its payload (docs/contract.md#judging-a-skills-answer)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from vmware_pilot.dispatch.judge import judge, payload_of
from vmware_pilot.dispatch.protocol import OutcomeKind


def text(value: Any, *, is_error: bool = False, structured: Any = None) -> CallToolResult:
    body = value if isinstance(value, str) else json.dumps(value)
    return CallToolResult(
        content=[TextContent(type="text", text=body)], is_error=is_error, structured_content=structured
    )


def test_structured_result_wrapper_is_unwrapped() -> None:
    assert payload_of(text("[1]", structured={"result": [1, 2]})) == [1, 2]
    assert payload_of(text("{}", structured={"result": None})) is None


def test_text_blocks_are_parsed_as_json_or_kept_as_text() -> None:
    assert payload_of(text({"a": 1})) == {"a": 1}
    assert payload_of(text("plain words")) == "plain words"


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (text({"ok": True}), OutcomeKind.SUCCEEDED),
        (text({"error": None}), OutcomeKind.SUCCEEDED),
        (text("Error: looks bad but is text"), OutcomeKind.SUCCEEDED),
        (text([{"a": 1}, {"b": 2}]), OutcomeKind.SUCCEEDED),
        (text({"error": "no such VM"}), OutcomeKind.FAILED),
        (text([{"error": "no such VM"}]), OutcomeKind.FAILED),
        (text("Error executing tool x: boom", is_error=True), OutcomeKind.FAILED),
        (text({"action": "preview", "blast_radius": {}}), OutcomeKind.PREVIEW_ONLY),
        (text("{}", structured={"action": "preview"}), OutcomeKind.PREVIEW_ONLY),
    ],
)
def test_outcome_of_ordinary_tools(result: CallToolResult, kind: OutcomeKind) -> None:
    assert judge("monitor", "get_alarms", result).kind is kind


def test_is_error_keeps_the_skills_own_error_text_as_data() -> None:
    outcome = judge("aiops", "power_off_vm", text({"error": "VM not found", "vm": "x"}, is_error=True))
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.payload == {"error": "VM not found", "vm": "x"}
    assert outcome.message == "VM not found"


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ({"exit_code": 0, "stdout": "ok"}, OutcomeKind.SUCCEEDED),
        ({"exit_code": 2, "stderr": "denied"}, OutcomeKind.FAILED),
        ({"exit_code": -1}, OutcomeKind.EFFECT_UNKNOWN),
        ({"timed_out": True, "exit_code": 0}, OutcomeKind.EFFECT_UNKNOWN),
        ({"exit_code": True}, OutcomeKind.SUCCEEDED),
    ],
)
def test_guest_commands_are_judged_by_exit_code(payload: dict[str, Any], kind: OutcomeKind) -> None:
    assert judge("vmware-aiops", "run_vm_guest_command", text(payload)).kind is kind
    # the same payload from another tool is not a guest command
    if kind is not OutcomeKind.SUCCEEDED:
        assert judge("monitor", "get_alarms", text(payload)).kind is OutcomeKind.SUCCEEDED


def test_guest_failure_names_exit_code_and_stderr() -> None:
    outcome = judge("aiops", "run_vm_guest_command_with_output", text({"exit_code": 3, "stderr": "x" * 500}))
    assert "exit_code 3" in outcome.message and len(outcome.message) < 400
