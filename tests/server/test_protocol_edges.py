"""JSON-RPC edges: unknown methods from newer clients, and requests the client cancels."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from tests.support.mcp_client import READ_STEP
from tests.support.raw import RawPeer, raw_session
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import BeforeSend, OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step
from vmware_pilot.server import create_server


@dataclass
class HeldDispatcher:
    """Succeeds every call, but only once the test releases it."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    calls: int = 0

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        return []

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        if before_send is not None:  # as a real dispatcher does once its session is ready
            await before_send()
        self.calls += 1
        self.started.set()
        await self.release.wait()
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    async def aclose(self) -> None:
        return None


async def _tool(peer: RawPeer, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = await peer.request("tools/call", {"name": name, "arguments": arguments})
    structured: dict[str, Any] = reply["result"]["structuredContent"]
    return structured


async def test_unknown_method_gets_method_not_found_and_the_session_goes_on(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    app = build_app(settings)
    try:
        with caplog.at_level(logging.INFO):
            async with raw_session(create_server(app, actor=Actor("t"))) as peer:
                reply = await peer.request("server/discover", {"protocolVersion": "2026-07-28"})
                await peer.notify("notifications/something_new", {"x": 1})
                assert reply["error"]["code"] == -32601
                assert reply["error"]["message"] == "Method not found"
                assert "result" in await peer.request("ping")
                listed = await _tool(peer, "list_workflows", {})
                assert listed["templates"]
    finally:
        app.close()
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert noisy == [], [r.getMessage()[:200] for r in noisy]


async def test_a_cancelled_run_gets_no_response_and_no_more_progress_while_it_finishes(
    settings: Settings,
) -> None:
    dispatcher = HeldDispatcher()
    app = build_app(settings, dispatcher=dispatcher)
    try:
        async with raw_session(create_server(app, actor=Actor("t"))) as peer:
            await peer.request("logging/setLevel", {"level": "debug"})
            created = await _tool(
                peer,
                "create_workflow",
                {"name": "reads", "description": "two reads", "steps": [READ_STEP, READ_STEP]},
            )
            workflow_id = created["workflow_id"]
            await peer.post(
                {
                    "id": 7,
                    "method": "tools/call",
                    "params": {
                        "name": "run_workflow",
                        "arguments": {"workflow_id": workflow_id},
                        "_meta": {"progressToken": "run-7"},
                    },
                }
            )
            while not dispatcher.started.is_set():  # reading what the run tells meanwhile
                with anyio.move_on_after(0.05):
                    await peer.next()
            await peer.notify("notifications/cancelled", {"requestId": 7, "reason": "user stopped it"})
            # The ping is answered after the cancellation was handled (messages are read in order).
            assert "result" in await peer.request("ping")
            seen_before_release = len(peer.received)
            dispatcher.release.set()
            while True:
                status = await _tool(peer, "get_workflow_status", {"workflow_id": workflow_id})
                if status["state"] == "completed":
                    break
                await asyncio.sleep(0.05)
            after = peer.received[seen_before_release:]
    finally:
        await app.aclose()
    assert dispatcher.calls == 2  # the run went on detached and finished
    assert [m for m in peer.received if m.get("id") == 7] == []  # no response, not even an error
    assert [m for m in after if m.get("method") in ("notifications/progress", "notifications/message")] == []
    # Before the cancellation the client did hear about the run.
    assert any(m.get("method") == "notifications/progress" for m in peer.received[:seen_before_release])
