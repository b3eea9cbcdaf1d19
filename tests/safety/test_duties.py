"""Roles and the four-eyes rule as pure functions over (role, actor, workflow)."""

from __future__ import annotations

import pytest

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.safety.duties import (
    ADMIN,
    READ_TOOLS,
    READER,
    Role,
    approval_refusal,
    is_valid_name,
    tool_refusal,
)
from vmware_pilot.server import TOOL_NAMES

OTHERS = Role("operator", "others")


def _wf(created_by: str = "token:carol", authors: list[str] | None = None) -> Workflow:
    return Workflow.new("custom", WorkflowState.AWAITING_APPROVAL, created_by=created_by, authors=authors)


def _token(name: str) -> Actor:
    return Actor(name=name, kind="token", role="operator")


def test_admin_may_call_every_tool_and_reader_only_the_four_reads() -> None:
    assert ADMIN.visible(TOOL_NAMES) == list(TOOL_NAMES)
    assert READER.visible(TOOL_NAMES) == [
        "review_workflow",
        "get_workflow_status",
        "list_workflows",
        "get_skill_catalog",
    ]
    assert set(READER.visible(TOOL_NAMES)) == READ_TOOLS


@pytest.mark.parametrize(
    "tool", ["approve", "create_workflow", "run_workflow", "rollback", "cancel_workflow"]
)
def test_reader_is_refused_every_write_tool_with_a_reason_naming_role_and_tool(tool: str) -> None:
    reason = tool_refusal(READER, tool)
    assert reason is not None and "'reader'" in reason and tool in reason


def test_approve_rule_none_hides_approve_even_when_the_role_lists_every_tool() -> None:
    role = Role("runner", "none")
    assert not role.may_call("approve")
    assert role.may_call("run_workflow")
    assert "approve" not in role.visible(TOOL_NAMES)


def test_a_custom_tool_list_allows_only_those_tools() -> None:
    role = Role("planner", "none", frozenset({"design_workflow", "update_draft"}))
    assert tool_refusal(role, "update_draft") is None
    assert "not among the role's tools" in (tool_refusal(role, "run_workflow") or "")


def test_four_eyes_refuses_the_creator_with_or_without_the_token_prefix() -> None:
    assert "you created" in (approval_refusal(OTHERS, _token("carol"), _wf("token:carol")) or "")
    assert "you created" in (approval_refusal(OTHERS, _token("carol"), _wf("carol")) or "")


def test_four_eyes_refuses_an_author_and_allows_someone_else() -> None:
    wf = _wf("token:carol", authors=["token:dave"])
    assert "you edited" in (approval_refusal(OTHERS, _token("dave"), wf) or "")
    assert approval_refusal(OTHERS, _token("erin"), wf) is None


def test_four_eyes_refuses_a_workflow_without_a_recorded_creator() -> None:
    assert "no recorded creator" in (approval_refusal(OTHERS, _token("erin"), _wf("")) or "")


def test_approve_any_allows_the_creator_and_none_refuses_everyone() -> None:
    assert approval_refusal(ADMIN, _token("carol"), _wf("token:carol")) is None
    assert approval_refusal(Role("auditor", "none"), _token("erin"), _wf()) is not None


def test_a_name_that_only_starts_like_the_callers_is_someone_else() -> None:
    assert approval_refusal(OTHERS, _token("carol"), _wf("token:caroline")) is None


@pytest.mark.parametrize("name", ["alice", "ci-bot.01", "A_b", "x" * 64])
def test_valid_names(name: str) -> None:
    assert is_valid_name(name)


@pytest.mark.parametrize("name", ["", "-x", ".x", "a b", "a:b", "token:x", "x" * 65, "é"])
def test_invalid_names(name: str) -> None:
    assert not is_valid_name(name)
