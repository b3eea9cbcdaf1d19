"""The typed results (``vmware_pilot.results``): what the service returns, how a result is written
out, the enums the output schemas list, and the predicates the CLI and the console read.

The wire text itself is held by the contract tests (tests/server/test_output_schemas.py and the
tool tests); these check the parts those cannot see one by one.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any

import pytest

from tests.support.mcp_client import Client
from vmware_pilot.domain.enums import Outcome, StepStatus, WorkflowState
from vmware_pilot.engine.service import PilotService
from vmware_pilot.results import (
    ActiveWorkflow,
    ApproveResult,
    CancelResult,
    CreateResult,
    ReviewResult,
    RollbackResult,
    RunResult,
    TemplateInfo,
)
from vmware_pilot.server.results import dump_json, is_error_payload

_RECORD: dict[str, Any] = {
    "id": "wf-1",
    "workflow_type": "t",
    "state": "pending",
    "steps": [],
    "params": {},
    "created_at": "2026-12-01T00:00:00+00:00",
    "updated_at": "2026-12-01T00:00:00+00:00",
}


def _run(**keys: Any) -> RunResult:
    return RunResult(**{**_RECORD, **keys})


def _dict_like(annotation: Any) -> bool:
    """Whether ``annotation`` is, or holds at its top, a mapping (``dict[...]``, ``Mapping``)."""
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, (dict, Mapping)):
        return True
    if origin in (typing.Union, types.UnionType, Awaitable, Coroutine):
        return any(_dict_like(a) for a in typing.get_args(annotation))
    return False


def test_no_public_method_of_the_service_returns_a_dict() -> None:
    checked = []
    for name, fn in inspect.getmembers(PilotService, inspect.isfunction):
        if name.startswith("_"):
            continue
        returned = typing.get_type_hints(fn).get("return")
        assert returned is not None, f"PilotService.{name} says nothing of what it returns"
        assert not _dict_like(returned), f"PilotService.{name} returns {returned}"
        items = typing.get_args(returned)  # a list of results (flag_expired) holds models too
        assert not any(_dict_like(a) for a in items), f"PilotService.{name} returns {returned}"
        checked.append(name)
    # The 13 tools' operations and the reads around them are among those checked.
    assert {
        "run_workflow",
        "approve",
        "rollback",
        "get_workflow_status",
        "pending_gate",
        "explain_policy",
    } <= set(checked)


def test_the_operations_of_the_13_tools_are_annotated_with_their_models() -> None:
    hints = {
        n: typing.get_type_hints(getattr(PilotService, n)).get("return") for n in ("run_workflow", "approve")
    }
    assert hints == {"run_workflow": RunResult, "approve": ApproveResult}
    assert set(typing.get_args(typing.get_type_hints(PilotService.rollback)["return"])) >= {RollbackResult}
    assert set(typing.get_args(typing.get_type_hints(PilotService.cancel_workflow)["return"])) >= {
        CancelResult
    }


def test_a_result_writes_out_the_keys_set_in_declared_order_and_leaves_the_rest_out() -> None:
    made = CreateResult(
        message="m", workflow_id="wf-1", state=WorkflowState.PENDING, steps=[], workflow_type="t"
    )
    assert list(made.payload()) == ["workflow_id", "workflow_type", "state", "steps", "message"]
    assert "saved_as_template" not in made.payload() and not made.has("template_file")
    # A key set to its default value is written out all the same.
    saved = made.but(saved_as_template=False, template_file="x.yaml")
    assert list(saved.payload())[-3:] == ["saved_as_template", "message", "template_file"]
    assert json.loads(dump_json(saved))["state"] == "pending"  # an enum as its value on the wire


# The order of a run result's keys after the record, for each kind of answer (the contract's).
_RUN_ORDERS = [
    (
        {"outcome": "awaiting_approval", "pending_dispatch": [], "message": "m", "pending_gate": {}},
        ["outcome", "pending_dispatch", "message", "pending_gate"],
    ),
    (
        # an approval the gate still waits for more of: the message last
        {"message": "m", "outcome": "awaiting_approval", "pending_gate": {}, "approvals_missing": 1},
        ["outcome", "pending_gate", "approvals_missing", "message"],
    ),
    ({"error": "e", "outcome": "failed"}, ["outcome", "error"]),
    (
        # steps an approval at the CLI released to the agent
        {"released_to": "a", "message": "m", "outcome": "dispatch_required", "with_another_caller": []},
        ["with_another_caller", "outcome", "released_to", "message"],
    ),
]


@pytest.mark.parametrize(("keys", "order"), _RUN_ORDERS)
def test_a_run_result_writes_its_keys_in_the_contracts_order_for_each_kind_of_answer(
    keys: dict[str, Any], order: list[str]
) -> None:
    written = list(_run(**keys).payload())
    assert written[: len(_RECORD)] == list(_RECORD)
    assert written[len(_RECORD) :] == order


def test_a_rollback_sets_its_outcome_after_the_steps_handed_out_and_a_cancel_its_action_last() -> None:
    base = _run(pending_dispatch=[], message="m", outcome="failed", error="e")
    rolled = RollbackResult.extending(base, action="rollback_incomplete")
    assert list(rolled.payload())[len(_RECORD) :] == [
        "pending_dispatch",
        "message",
        "outcome",
        "error",
        "action",
    ]
    cancelled = CancelResult.extending(_run(outcome="cancelled"), action="cancelled", rejected_by="bob")
    assert list(cancelled.payload())[len(_RECORD) :] == ["outcome", "action", "rejected_by"]


def test_a_listed_template_keeps_the_order_of_its_kind() -> None:
    broken = TemplateInfo(name="x", file="x.yaml", type="custom", error="bad")
    assert list(broken.payload()) == ["name", "file", "type", "error"]
    custom = TemplateInfo(
        name="x", description="d", file="x.yaml", steps=2, type="custom", parameters=[], example=None
    )
    assert list(custom.payload()) == ["name", "description", "file", "steps", "type", "parameters", "example"]
    builtin = TemplateInfo(name="b", type="builtin", description="d", steps=1, parameters=[], example=None)
    assert list(builtin.payload()) == ["name", "type", "description", "steps", "parameters", "example"]


# (result, is_refusal, is_failed, is_at_gate, is_dispatch_required, is_completed, is_terminal, is_waiting)
_PREDICATES = [
    (_run(outcome="completed", state="completed"), False, False, False, False, True, True, False),
    (_run(outcome="failed", state="failed", error="e"), True, True, False, False, False, True, False),
    (_run(outcome="failed", state="failed"), True, True, False, False, False, True, False),
    (_run(state="failed", error="undo failed"), True, False, False, False, False, True, False),
    (
        _run(outcome="awaiting_approval", state="awaiting_approval"),
        False,
        False,
        True,
        False,
        False,
        False,
        True,
    ),
    (_run(outcome="dispatch_required", state="running"), False, False, False, True, False, False, False),
    (_run(outcome="cancelled", state="cancelled"), False, False, False, False, False, True, False),
    (_run(state="pending"), False, False, False, False, False, False, False),
]


@pytest.mark.parametrize("row", _PREDICATES)
def test_predicates_agree_with_the_contracts_iserror_rule_and_the_states(row: tuple[Any, ...]) -> None:
    result, refusal, failed, at_gate, dispatch, completed, terminal, waiting = row
    assert (
        result.is_refusal,
        result.is_failed,
        result.is_at_gate,
        result.is_dispatch_required,
        result.is_completed,
        result.is_terminal,
        result.is_waiting,
    ) == (refusal, failed, at_gate, dispatch, completed, terminal, waiting)
    assert result.is_refusal == is_error_payload(json.loads(dump_json(result)))  # the server's rule


def test_review_active_workflow_and_end_action_predicates() -> None:
    summary = {
        "total_steps": 0,
        "destructive_steps": 0,
        "write_steps": 0,
        "read_only_steps": 0,
        "classified_steps": 0,
        "unclassified_steps": 0,
        "approval_gates": 0,
        "parallel_groups": 0,
        "est_duration_min": 0,
    }
    assert ReviewResult(
        workflow_id="w", verdict="needs_revision", findings=[], summary=summary
    ).needs_revision
    assert not ReviewResult(workflow_id="w", verdict="approved", findings=[], summary=summary).needs_revision
    listed = ActiveWorkflow(id="w", type="t", state="awaiting_approval", created_at="", updated_at="")
    assert listed.is_waiting and not listed.is_terminal
    assert RollbackResult.extending(_run(), action="rollback_incomplete").is_incomplete
    assert ApproveResult.extending(_run(), action="cancelled").is_rejection


def test_a_value_outside_a_closed_set_is_refused_when_the_result_is_built() -> None:
    with pytest.raises(ValueError, match="state"):
        _run(state="sleeping")
    with pytest.raises(ValueError, match="outcome"):
        _run(outcome="maybe")


def _enum_at(schema: dict[str, Any], model: str, field: str) -> list[Any]:
    """The values the tool's schema allows for ``model.field`` (through a ``$ref`` if there is one)."""
    prop = schema["$defs"][model]["properties"][field]
    for choice in prop.get("anyOf", [prop]):
        ref = choice.get("$ref")
        if ref:
            return list(schema["$defs"][ref.rsplit("/", 1)[1]]["enum"])
        if "enum" in choice:
            return [v for v in choice["enum"] if v is not None]
    raise AssertionError(f"{model}.{field} lists no values: {prop}")


async def test_the_output_schemas_list_the_values_of_every_closed_set(client: Client) -> None:
    schemas = {t.name: t.output_schema for t in (await client.session.list_tools()).tools}
    states = [s.value for s in WorkflowState]
    expected = {
        ("get_workflow_status", "StatusView", "state"): states,
        ("get_workflow_status", "RecordStep", "status"): [s.value for s in StepStatus],
        ("run_workflow", "RunResult", "outcome"): [o.value for o in Outcome],
        ("review_workflow", "Finding", "severity"): ["low", "medium", "high"],
        ("review_workflow", "ReviewResult", "verdict"): ["approved", "needs_revision"],
        ("get_skill_catalog", "CatalogTool", "risk"): ["low", "medium", "high", "critical"],
        ("list_workflows", "TemplateInfo", "type"): ["builtin", "custom"],
        ("list_workflows", "ActiveWorkflow", "state"): states,
        ("create_workflow", "CreateResult", "state"): states,
        ("rollback", "RollbackEntry", "status"): [
            "success",
            "partial",
            "failed",
            "unknown",
            "not_reversible",
            "skipped",
        ],
        ("rollback", "RollbackResult", "action"): ["cancelled", "rolled_back", "rollback_incomplete"],
        ("cancel_workflow", "BlastRadius", "state_after"): states,
    }
    for (tool, model, field), values in expected.items():
        schema = schemas[tool]
        assert schema is not None
        assert _enum_at(schema, model, field) == values, (tool, model, field)
