"""Prompts (templates and common flows), completions, logging, and the capabilities declared for them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    LoggingMessageNotification,
    PromptReference,
    ResourceTemplateReference,
)

from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.templates.builtin import BUILTINS

FLOWS = {"plan_change", "handle_alert", "roll_back_workflow", "review_workflows"}


async def test_capabilities_declare_what_the_server_has(client: Client) -> None:
    caps = client.session.server_capabilities
    assert caps is not None
    assert caps.resources is not None and caps.resources.subscribe is True
    assert caps.prompts is not None and caps.completions is not None and caps.logging is not None


async def test_every_builtin_and_flow_is_a_prompt_with_described_arguments(client: Client) -> None:
    prompts = {p.name: p for p in (await client.session.list_prompts()).prompts}
    assert set(prompts) == {b.name for b in BUILTINS} | FLOWS
    listed = {t["name"]: t for t in (await client.ok("list_workflows"))["templates"]}
    for template in BUILTINS:
        prompt = prompts[template.name]
        assert prompt.description == template.description
        arguments = {a.name: a for a in prompt.arguments or []}
        parameters = {p["name"]: p for p in listed[template.name]["parameters"]}
        assert list(arguments) == list(parameters)
        assert all(arguments[n].required is parameters[n]["required"] for n in arguments)
        assert all(a.description for a in arguments.values())
    assert all(p.description and p.arguments for n, p in prompts.items() if n in FLOWS)


async def test_a_template_prompt_asks_for_the_call_its_arguments_make(client: Client) -> None:
    got = await client.session.get_prompt(
        "investigate_alert", {"alert_entity": "db-01", "deep_dive": "true", "target": "vc-lab"}
    )
    text = got.messages[0].content.text  # type: ignore[union-attr]
    call, _ = json.JSONDecoder().raw_decode(text, text.index("{"))
    assert call == {
        "workflow_type": "investigate_alert",
        "params": {"alert_entity": "db-01", "deep_dive": True, "target": "vc-lab"},
    }
    # The call the prompt asks for works.
    created = await client.ok("create_workflow_from_template", **call)
    assert created["workflow_id"]


async def test_flow_prompts_name_their_arguments(client: Client) -> None:
    got = await client.session.get_prompt("roll_back_workflow", {"workflow_id": "wf-123"})
    text = got.messages[0].content.text  # type: ignore[union-attr]
    assert "wf-123" in text and "confirm=false" in text


@pytest.mark.parametrize(("name", "arguments"), [("no_such_prompt", {}), ("roll_back_workflow", {})])
async def test_unknown_prompt_or_missing_argument_is_invalid_params(
    client: Client, name: str, arguments: dict[str, str]
) -> None:
    with pytest.raises(MCPError) as refused:
        await client.session.get_prompt(name, arguments)
    assert refused.value.error.code == -32602
    assert refused.value.error.data["hint"]


async def test_completions_offer_ids_names_states_and_fixed_values(client: Client) -> None:
    first, second = await client.incident(), await client.incident()
    workflow = ResourceTemplateReference(type="ref/resource", uri="pilot://workflows/{workflow_id}")
    ids = (await client.session.complete(workflow, {"name": "workflow_id", "value": "wf-"})).completion
    assert set(ids.values) == {first, second}
    only = (await client.session.complete(workflow, {"name": "workflow_id", "value": first})).completion
    assert only.values == [first]
    rollback = PromptReference(type="ref/prompt", name="roll_back_workflow")
    assert (await client.session.complete(rollback, {"name": "workflow_id", "value": ""})).completion.values
    template = ResourceTemplateReference(type="ref/resource", uri="pilot://templates/{name}")
    names = (await client.session.complete(template, {"name": "name", "value": "baseline_"})).completion
    assert names.values == ["baseline_capture", "baseline_audit", "baseline_remediate"]
    states = PromptReference(type="ref/prompt", name="review_workflows")
    got = (await client.session.complete(states, {"name": "state", "value": ""})).completion
    assert got.values == [s.value for s in WorkflowState]
    deep = PromptReference(type="ref/prompt", name="investigate_alert")
    assert (await client.session.complete(deep, {"name": "deep_dive", "value": "t"})).completion.values == [
        "true"
    ]
    free = (await client.session.complete(deep, {"name": "alert_entity", "value": ""})).completion
    assert free.values == []


@pytest.mark.parametrize("name", ["no_such_prompt", "x" * 5000])
async def test_a_completion_for_an_unknown_prompt_is_an_invalid_params_error(
    client: Client, name: str
) -> None:
    # As prompts/get answers it, not an empty list that looks like "no suggestions".
    with pytest.raises(MCPError) as refused:
        await client.session.complete(
            PromptReference(type="ref/prompt", name=name), {"name": "workflow_id", "value": ""}
        )
    assert refused.value.error.code == -32602
    assert refused.value.error.message == f"Unknown prompt: {name[:100]}"
    assert refused.value.error.data["hint"]
    # A known prompt's argument that has no suggestions still completes to nothing.
    known = PromptReference(type="ref/prompt", name="plan_change")
    assert (await client.session.complete(known, {"name": "goal", "value": ""})).completion.values == []


class Logs:
    def __init__(self) -> None:
        self.messages: list[LoggingMessageNotification] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, LoggingMessageNotification):
            self.messages.append(message)


@pytest.mark.parametrize(
    ("level", "heard"), [(None, False), ("info", True), ("debug", True), ("warning", False)]
)
async def test_run_progress_is_logged_at_the_level_the_client_set(
    pilot_app: PilotApp, level: str | None, heard: bool
) -> None:
    logs = Logs()
    async with connect(pilot_app, message_handler=logs) as client:
        if level is not None:
            await client.session.set_logging_level(level)  # type: ignore[arg-type]
        workflow_id = await client.incident()
        await client.ok("run_workflow", workflow_id=workflow_id)
        await client.session.send_ping()  # notifications before the ping's answer have arrived
    assert bool(logs.messages) is heard
    for message in logs.messages:
        assert message.params.logger == "vmware_pilot.run" and message.params.level == "info"
        assert message.params.data["workflow_id"] == workflow_id
    if heard:
        assert "waiting for approval" in logs.messages[-1].params.data["message"]


async def test_a_completion_with_a_long_prefix_is_invalid_params_without_a_path(
    client: Client, pilot_app: PilotApp
) -> None:
    await client.incident()  # a row for the prefix to be compared with
    workflow = ResourceTemplateReference(type="ref/resource", uri="pilot://workflows/{workflow_id}")
    for typed in ("w" * 60_000, "%" * 30_000, "w" * 257):
        with pytest.raises(MCPError) as refused:
            await client.session.complete(workflow, {"name": "workflow_id", "value": typed})
        error = refused.value.error
        assert error.code == -32602 and "at most 256" in error.message, error
        assert len(error.message) < 300 and "pilot.db" not in str(error) and "/" not in error.message
        assert error.data["hint"]
    longest = (
        await client.session.complete(workflow, {"name": "workflow_id", "value": "w" * 256})
    ).completion
    assert longest.values == []
    assert (
        await client.session.complete(workflow, {"name": "workflow_id", "value": "wf-"})
    ).completion.values


async def test_a_completion_the_store_cannot_answer_is_an_internal_error_without_a_path(
    client: Client, pilot_app: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vmware_pilot.errors import StoreError

    def unavailable(*_: Any) -> list[str]:  # a fault the real store gives on a broken disk
        raise StoreError(
            f"The workflow database is unavailable (SQLite database {pilot_app.settings.home}/pilot.db)"
        )

    monkeypatch.setattr(pilot_app.store.workflows, "workflow_ids", unavailable)
    workflow = ResourceTemplateReference(type="ref/resource", uri="pilot://workflows/{workflow_id}")
    with pytest.raises(MCPError) as refused:
        await client.session.complete(workflow, {"name": "workflow_id", "value": "wf-"})
    error = refused.value.error
    assert (
        error.code == -32603
        and "pilot.db" not in str(error)
        and str(pilot_app.settings.home) not in str(error)
    )
    assert error.data["hint"]
