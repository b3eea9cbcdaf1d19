"""Every tool, through a real in-memory MCP session, with valid-shaped and hostile arguments.

Each call must be answered with a result or a bounded refusal (``checks.check_answer``); after
the run the audit chain verifies and every stored workflow loads. Examples per test come from
the Hypothesis profile (``HYPOTHESIS_PROFILE``: ``ci`` by default, ``long`` in scripts/fuzz.sh).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import TextContent

from tests.support.fuzz_checks import check_answer
from tests.support.fuzz_strategies import TOOLS, arguments_for, resolve
from tests.support.mcp_client import GATE, INCIDENT, READ_STEP, Client, connect
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings


@dataclass
class Fuzz:
    client: Client
    ids: list[str] = field(default_factory=list)
    calls: int = 0

    async def call(self, tool: str, drawn: dict[str, Any]) -> dict[str, Any]:
        arguments = resolve(drawn, self.ids)
        # A guard against a hang (a test that never ends), not a timing assertion.
        with anyio.fail_after(900):
            result = await self.client.session.call_tool(tool, arguments)
        self.calls += 1
        assert len(result.content) == 1 and isinstance(result.content[0], TextContent), tool
        payload = check_answer(
            tool, arguments, result.content[0].text, result.structured_content, result.is_error
        )
        wf = payload.get("workflow_id")
        if not result.is_error and isinstance(wf, str) and wf not in self.ids:
            self.ids.append(wf)
        return payload


def _verify_store(settings: Settings) -> None:
    """The audit chain verifies and every stored workflow loads (the HTTP fuzz uses the CLI)."""
    app = build_app(settings)
    try:
        report = app.service.store.audit.verify_audit()
        assert report.ok, report.description
        summaries = app.service.store.workflows.list_all()
        assert summaries
        for summary in summaries:
            app.service.store.workflows.load(summary["id"])
    finally:
        app.close()


@pytest.fixture
async def fuzz(settings: Settings) -> AsyncIterator[Fuzz]:
    app = build_app(settings)
    ready: asyncio.Future[Fuzz] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with connect(app) as client:
                state = Fuzz(client)
                # Real workflows to aim at: a template plan, a gated custom plan, a draft.
                await state.call(
                    "create_workflow_from_template",
                    {"workflow_type": "incident_response", "params": INCIDENT},
                )
                await state.call(
                    "create_workflow",
                    {"name": "fz", "description": "d", "steps": [READ_STEP, GATE, READ_STEP]},
                )
                await state.call("design_workflow", {"goal": "restart the web tier"})
                ready.set_result(state)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await ready
    finally:
        stop.set()
        await task
        app.close()
    _verify_store(settings)


@pytest.mark.parametrize("tool", TOOLS)
@given(data=st.data())
@pytest.mark.slow
async def test_each_tool_answers_any_arguments(fuzz: Fuzz, tool: str, data: st.DataObject) -> None:
    await fuzz.call(tool, data.draw(arguments_for(tool), label="arguments"))


@given(data=st.data())
async def test_any_sequence_of_calls_is_answered(fuzz: Fuzz, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(1, 5), label="calls")):
        tool = data.draw(st.sampled_from(TOOLS), label="tool")
        await fuzz.call(tool, data.draw(arguments_for(tool), label=f"{tool} arguments"))
