"""The MCP Tasks extension (server/tasks.py, engine/tasks.py) through a real 2.x client pinned to
2026-07-28 that declares it, against Pilot's real server (``create_server``) and store.

A dispatched run is answered with a task handle at once; ``tasks/get`` follows it (its progress
from the workflow's record) to the result the synchronous call returns; any app on the same
database answers for it; a task is its starter's alone; ``tasks/cancel`` is ``cancel_workflow``'s
rules, its refusal a result too. The dispatcher holds a call or the skills' start-up only where
the test needs the run to stand still at that point (tests/support/task_server.py); the real
processes and skills are in test_task_replicas_http.py and test_task_stdio_shutdown.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from tests.support.fakes import ScriptedDispatcher, SteppedDispatcher, failed
from tests.support.task_server import (
    ALICE,
    EVENTS,
    GATE,
    POWER_ON,
    READ,
    HeldPreflight,
    TaskHandle,
    call,
    task_request,
    tasks_client,
    workflow,
)
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.safety.duties import READER
from vmware_pilot.server import create_server
from vmware_pilot.server.results import dump_json
from vmware_pilot.server.tasks import EXTENSION_ID, PROGRESS_META, REFUSAL_META

BOB = Actor("bob", kind="token")
NOT_FOUND = -32602
MISSING_CAPABILITY = -32021


def ok(params: dict[str, Any]) -> StepOutcome:
    return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True, **params})


def _held() -> tuple[SteppedDispatcher, asyncio.Event]:
    answer = asyncio.Event()
    return SteppedDispatcher(answer={"list_virtual_machines": answer}), answer


@pytest.fixture
def held(settings: Settings) -> Iterator[tuple[PilotApp, SteppedDispatcher, asyncio.Event]]:
    dispatcher, answer = _held()
    app = build_app(settings, dispatcher=dispatcher)
    yield app, dispatcher, answer
    answer.set()
    app.close()


def _structured(result: dict[str, Any] | CallToolResult) -> dict[str, Any]:
    if isinstance(result, CallToolResult):
        assert isinstance(result.structured_content, dict)
        return result.structured_content
    structured = result["structuredContent"]
    assert isinstance(structured, dict)
    return structured


async def test_a_run_is_answered_with_a_task_followed_to_the_synchronous_result(
    held: tuple[PilotApp, SteppedDispatcher, asyncio.Event],
) -> None:
    app, dispatcher, answer = held
    server = create_server(app, actor=ALICE)
    first, second = workflow(app, [READ, EVENTS]), workflow(app, [READ, EVENTS])
    async with tasks_client(server) as client:
        handle = await call(client, "run_workflow", workflow_id=first)
        assert isinstance(handle, TaskHandle)
        assert handle.status == "working" and handle.poll_interval_ms and handle.ttl_ms
        await dispatcher.went_out.wait()  # the first step is in flight

        working = await task_request(client, "tasks/get", handle.task_id)
        assert working["status"] == "working" and working["resultType"] == "complete"
        assert working["taskId"] == handle.task_id and "result" not in working
        assert working["_meta"][PROGRESS_META] == {"done": 0, "total": 2}
        assert "0 of 2 steps done" in working["statusMessage"]
        assert "step 0 (aiops.list_virtual_machines)" in working["statusMessage"]

        answer.set()
        await server.drain()
        done = await task_request(client, "tasks/get", handle.task_id)
        assert done["status"] == "completed" and done["_meta"][PROGRESS_META] == {"done": 2, "total": 2}
        assert done["lastUpdatedAt"] >= done["createdAt"]

    async with tasks_client(server, declare=False) as plain:  # the same run, synchronously
        direct = await call(plain, "run_workflow", workflow_id=second)
    assert isinstance(direct, CallToolResult)
    result, expected = done["result"], direct.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert set(result) == set(expected) - {"_meta"}
    assert result["isError"] is expected["isError"] is False
    task_payload, direct_payload = _structured(result), _structured(direct)
    assert list(task_payload) == list(direct_payload)  # the contract's keys, in its order
    assert task_payload["state"] == direct_payload["state"] == "completed"
    assert task_payload["outcome"] == direct_payload["outcome"]
    assert result["content"] == [{"type": "text", "text": dump_json(task_payload)}]
    assert app.store.workflows.load(first).state is WorkflowState.COMPLETED


async def test_a_client_that_does_not_declare_the_extension_gets_the_result_in_the_call(
    settings: Settings,
) -> None:
    with closing(build_app(settings, dispatcher=ScriptedDispatcher())) as app:
        server = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [READ])
        async with tasks_client(server, declare=False) as client:
            result = await call(client, "run_workflow", workflow_id=workflow_id)
            assert isinstance(result, CallToolResult) and _structured(result)["state"] == "completed"
            with pytest.raises(MCPError) as caught:
                await task_request(client, "tasks/get", "anything")
        assert caught.value.error.code == MISSING_CAPABILITY
        assert caught.value.error.data == {
            "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }


async def test_without_dispatch_nothing_runs_long_and_no_task_is_made(settings: Settings) -> None:
    with closing(build_app(settings)) as app:  # hand-back mode: the steps go back to the agent at once
        server = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [READ])
        async with tasks_client(server) as client:
            result = await call(client, "run_workflow", workflow_id=workflow_id)
        assert isinstance(result, CallToolResult) and "pending_dispatch" in _structured(result)


async def test_a_run_refused_inside_is_a_task_completed_with_the_refusal_the_call_returns(
    settings: Settings,
) -> None:
    not_installed = ScriptedDispatcher(preflight_problems=["step 0: vmware-aiops-mcp is not installed"])
    with closing(build_app(settings, dispatcher=not_installed)) as app:
        server = create_server(app, actor=ALICE)
        first, twin = workflow(app, [READ]), workflow(app, [READ])
        async with tasks_client(server) as client:
            handle = await call(client, "run_workflow", workflow_id=first)
            assert isinstance(handle, TaskHandle)
            await server.drain()
            done = await task_request(client, "tasks/get", handle.task_id)
        async with tasks_client(server, declare=False) as plain:
            direct = await call(plain, "run_workflow", workflow_id=twin)
    assert isinstance(direct, CallToolResult) and direct.is_error
    assert done["status"] == "completed"  # a tool's refusal is a result, not a failed task
    expected = {
        k: v
        for k, v in direct.model_dump(by_alias=True, mode="json", exclude_none=True).items()
        if k != "_meta"
    }
    assert done["result"] == json.loads(json.dumps(expected).replace(twin, first))
    assert _structured(done["result"])["error"].startswith("Nothing was run")
    assert done["statusMessage"] == _structured(done["result"])["error"]


async def test_a_run_refused_at_once_is_answered_in_the_call(settings: Settings) -> None:
    with closing(build_app(settings, dispatcher=ScriptedDispatcher())) as app:
        server = create_server(app, actor=ALICE)
        async with tasks_client(server) as client:
            unknown = await call(client, "run_workflow", workflow_id="wf-nope")
        assert isinstance(unknown, CallToolResult) and unknown.is_error
        assert "wf-nope" in _structured(unknown)["error"]


async def test_a_task_is_its_starters_alone_and_an_unknown_one_is_not_found(
    held: tuple[PilotApp, SteppedDispatcher, asyncio.Event],
) -> None:
    app, _, _ = held  # its read stays in flight: the task keeps working
    server = create_server(app, actor=ALICE)
    other = create_server(app, actor=BOB)
    workflow_id = workflow(app, [READ])
    async with tasks_client(server) as alice, tasks_client(other) as bob:
        handle = await call(alice, "run_workflow", workflow_id=workflow_id)
        assert isinstance(handle, TaskHandle)
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            with pytest.raises(MCPError) as caught:
                await task_request(bob, method, handle.task_id)
            assert caught.value.error.code == NOT_FOUND and "Task not found" in caught.value.error.message
        with pytest.raises(MCPError) as unknown:
            await task_request(alice, "tasks/get", "no-such-task")
        assert unknown.value.error.code == NOT_FOUND
        ack = await task_request(alice, "tasks/update", handle.task_id)  # nothing is asked: ignored
        assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}
        assert (await task_request(alice, "tasks/get", handle.task_id))["status"] == "working"


async def test_an_expired_task_is_not_found(settings: Settings) -> None:
    with closing(build_app(settings, dispatcher=ScriptedDispatcher())) as app:
        server = create_server(app, actor=ALICE)
        row = app.service.store.tasks.create_task("old", "token:alice", "run_workflow", "wf-1", "p", -1.0)
        assert row.status == "working"
        async with tasks_client(server) as client:
            with pytest.raises(MCPError) as caught:
                await task_request(client, "tasks/get", "old")
        assert caught.value.error.code == NOT_FOUND


async def test_cancel_is_refused_as_cancel_workflow_refuses_it_while_a_step_is_in_flight(
    held: tuple[PilotApp, SteppedDispatcher, asyncio.Event],
) -> None:
    app, dispatcher, answer = held
    server = create_server(app, actor=ALICE)
    workflow_id = workflow(app, [READ])
    async with tasks_client(server) as client:
        handle = await call(client, "run_workflow", workflow_id=workflow_id)
        assert isinstance(handle, TaskHandle)
        await dispatcher.went_out.wait()
        refused = await task_request(client, "tasks/cancel", handle.task_id)  # a result, not an error
        assert set(refused) <= {"resultType", "_meta"} and refused["resultType"] == "complete"
        refusal = refused["_meta"][REFUSAL_META]
        assert "running" in refusal["error"] and "get_workflow_status" in refusal["hint"]
        assert (await task_request(client, "tasks/get", handle.task_id))["status"] == "working"
        answer.set()
        await server.drain()
        assert (await task_request(client, "tasks/get", handle.task_id))["status"] == "completed"
        ended = await task_request(client, "tasks/cancel", handle.task_id)
        assert "already completed" in ended["_meta"][REFUSAL_META]["error"]
    assert app.store.workflows.load(workflow_id).state is WorkflowState.COMPLETED


async def test_cancel_is_refused_for_a_role_without_cancelworkflow(settings: Settings) -> None:
    dispatcher = HeldPreflight()
    with closing(build_app(settings, dispatcher=dispatcher)) as app:
        starter = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [READ])
        async with tasks_client(starter) as client:
            handle = await call(client, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle)
            await dispatcher.waiting.wait()
            reader = create_server(app, actor=ALICE, role_of=lambda _: READER)
            async with tasks_client(reader) as read_only:
                refused = await task_request(read_only, "tasks/cancel", handle.task_id)
            refusal = refused["_meta"][REFUSAL_META]
            assert refusal["tool"] == "cancel_workflow" and refusal["role"] == "reader"
            assert refusal["error"] and refusal["hint"]
            dispatcher.go.set()
            await starter.drain()
        assert app.store.workflows.load(workflow_id).state is WorkflowState.COMPLETED


async def test_cancel_goes_through_cancel_workflow_and_the_task_ends_cancelled(settings: Settings) -> None:
    dispatcher = HeldPreflight()
    with closing(build_app(settings, dispatcher=dispatcher)) as app:
        server = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [READ])
        async with tasks_client(server) as client:
            handle = await call(client, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle)
            await dispatcher.waiting.wait()  # the skills are starting: nothing is in flight
            ack = await task_request(client, "tasks/cancel", handle.task_id)
            assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}
            dispatcher.go.set()
            await server.drain()
            ended = await task_request(client, "tasks/get", handle.task_id)
        assert ended["status"] == "cancelled" and "result" not in ended
        wf = app.store.workflows.load(workflow_id)
        assert wf.state is WorkflowState.CANCELLED
        assert dispatcher.step_calls == []
        cancelled = [e for e in wf.audit_log if e.action == "cancelled"]
        assert [(e.actor, e.detail) for e in cancelled] == [
            ("token:alice", "cancelled through its MCP task (run_workflow)")
        ]


async def test_an_approval_that_releases_dispatched_steps_is_a_task(settings: Settings) -> None:
    dispatcher, answer = _held()
    with closing(build_app(settings, dispatcher=dispatcher)) as app:
        server = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [EVENTS, GATE, READ])
        async with tasks_client(server) as client:
            at_gate = await call(client, "run_workflow", workflow_id=workflow_id)
            assert isinstance(at_gate, TaskHandle)
            await server.drain()
            stopped = await task_request(client, "tasks/get", at_gate.task_id)
            assert _structured(stopped["result"])["state"] == "awaiting_approval"

            dispatcher.went_out.clear()  # the run's first step went out before the gate
            handle = await call(client, "approve", workflow_id=workflow_id, approver="alice")
            assert isinstance(handle, TaskHandle)
            await dispatcher.went_out.wait()
            working = await task_request(client, "tasks/get", handle.task_id)
            assert working["status"] == "working" and working["_meta"][PROGRESS_META]["done"] == 2
            answer.set()
            await server.drain()
            done = await task_request(client, "tasks/get", handle.task_id)
        assert done["status"] == "completed"
        assert _structured(done["result"])["outcome"] == "completed"


async def test_a_task_whose_pilot_shuts_down_mid_call_ends_failed(
    held: tuple[PilotApp, SteppedDispatcher, asyncio.Event],
) -> None:
    app, dispatcher, _ = held
    server = create_server(app, actor=ALICE)
    workflow_id = workflow(app, [READ])
    async with tasks_client(server) as client:
        handle = await call(client, "run_workflow", workflow_id=workflow_id)
        assert isinstance(handle, TaskHandle)
        await dispatcher.went_out.wait()
        carried = [t for t in asyncio.all_tasks() if t.get_name() == "task-run_workflow"]
        assert len(carried) == 1
        carried[0].cancel()  # as the event loop cancels what is left when the server stops
        await server.drain()
        ended = await task_request(client, "tasks/get", handle.task_id)
    assert ended["status"] == "failed" and ended["error"]["code"] == -32603
    assert "shut down" in ended["statusMessage"]


async def test_a_call_the_callers_role_refuses_is_answered_at_once_not_made_a_task(
    settings: Settings,
) -> None:
    with closing(build_app(settings, dispatcher=ScriptedDispatcher())) as app:
        server = create_server(app, actor=ALICE, role_of=lambda _: READER)
        workflow_id = workflow(app, [READ])
        async with tasks_client(server) as client:
            result = await call(client, "run_workflow", workflow_id=workflow_id)
        assert isinstance(result, CallToolResult) and result.is_error
        assert _structured(result)["role"] == "reader" and _structured(result)["tool"] == "run_workflow"
        assert app.store.workflows.load(workflow_id).state is WorkflowState.PENDING


async def test_only_the_approval_that_may_release_the_gate_is_a_task(settings: Settings) -> None:
    two = {**GATE, "params": {"message": "Two people, please", "approvals_required": 2}}
    with closing(build_app(settings, dispatcher=ScriptedDispatcher())) as app:
        alices = create_server(app, actor=ALICE)
        bobs = create_server(app, actor=BOB)
        workflow_id = workflow(app, [EVENTS, two, POWER_ON])
        async with tasks_client(alices) as alice, tasks_client(bobs) as bob:
            assert isinstance(await call(alice, "run_workflow", workflow_id=workflow_id), TaskHandle)
            await alices.drain()
            first = await call(alice, "approve", workflow_id=workflow_id)  # one of two: releases nothing
            assert isinstance(first, CallToolResult) and not first.is_error
            assert _structured(first)["state"] == "awaiting_approval"
            second = await call(bob, "approve", workflow_id=workflow_id)
            assert isinstance(second, TaskHandle)
            await bobs.drain()
            done = await task_request(bob, "tasks/get", second.task_id)
        assert done["status"] == "completed" and _structured(done["result"])["outcome"] == "completed"
        assert app.store.workflows.load(workflow_id).state is WorkflowState.COMPLETED


async def test_a_confirmed_rollback_is_a_task_and_its_preview_is_not(settings: Settings) -> None:
    second_fails = ScriptedDispatcher(
        answers={
            "power_on_vm": lambda skill, tool, params: (
                failed("no host") if params["vm_name"] == "b" else ok(params)
            )
        }
    )
    with closing(build_app(settings, dispatcher=second_fails)) as app:
        server = create_server(app, actor=ALICE)
        power_on_b = {**POWER_ON, "params": {"vm_name": "b"}}
        workflow_id = workflow(app, [EVENTS, GATE, POWER_ON, power_on_b])
        async with tasks_client(server) as client:
            await call(client, "run_workflow", workflow_id=workflow_id)
            await server.drain()
            await call(client, "approve", workflow_id=workflow_id, approver="alice")
            await server.drain()
            assert app.store.workflows.load(workflow_id).state is WorkflowState.FAILED
            preview = await call(client, "rollback", workflow_id=workflow_id)
            assert isinstance(preview, CallToolResult) and _structured(preview)["action"] == "preview"
            handle = await call(client, "rollback", workflow_id=workflow_id, confirm=True)
            assert isinstance(handle, TaskHandle)
            await server.drain()
            done = await task_request(client, "tasks/get", handle.task_id)
        assert done["status"] == "completed"
        assert _structured(done["result"])["action"] == "rolled_back"
        assert _structured(done["result"])["state"] == app.store.workflows.load(workflow_id).state.value
        assert any(e.action == "rollback_completed" for e in app.store.workflows.load(workflow_id).audit_log)


async def test_a_2025_11_25_client_gets_the_result_in_the_call_and_no_tasks_methods(
    settings: Settings,
) -> None:
    with closing(build_app(settings, dispatcher=ScriptedDispatcher())) as app:
        server = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [READ])
        async with Client(server, mode="legacy", extensions=[advertise(EXTENSION_ID)]) as legacy:
            result = await call(legacy, "run_workflow", workflow_id=workflow_id)
            with pytest.raises(MCPError) as caught:
                await task_request(legacy, "tasks/get", "anything")
        assert isinstance(result, CallToolResult) and _structured(result)["state"] == "completed"
        assert caught.value.error.code == -32601  # its core tasks/* are not served (the SDK's choice too)


async def test_an_approval_asked_of_a_person_in_the_call_is_never_a_task(settings: Settings) -> None:
    elicit = settings.model_copy(update={"approvals": "elicit"})
    with closing(build_app(elicit, dispatcher=ScriptedDispatcher())) as app:
        server = create_server(app, actor=ALICE)
        workflow_id = workflow(app, [EVENTS, GATE, POWER_ON])
        async with tasks_client(server) as client:
            assert isinstance(await call(client, "run_workflow", workflow_id=workflow_id), TaskHandle)
            await server.drain()
            answered = await call(client, "approve", workflow_id=workflow_id, approver="alice")
        # The form is asked within the call (the extension resolves such exchanges before any task).
        assert isinstance(answered, CallToolResult) and answered.is_error  # no form here: refused
        assert app.store.workflows.load(workflow_id).state is WorkflowState.AWAITING_APPROVAL
