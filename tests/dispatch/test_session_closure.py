"""A skill server that goes away, in process (fast tier): gone between calls is "nothing was sent"
(``SessionClosed``, so the pool may retry on a new server), gone during a call is "effect
unknown" (``EffectUnknown``). The 2.x client reports both as one ``CONNECTION_CLOSED`` error;
``SkillSession`` tells them apart. test_stdio_dispatcher.py does the same with real processes
(slow tier)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from vmware_pilot.dispatch import session as session_module
from vmware_pilot.dispatch.locate import SkillCommand
from vmware_pilot.dispatch.session import SessionClosed, SkillSession
from vmware_pilot.errors import EffectUnknown


class Skill:
    """An in-process skill server whose ``exit()`` ends it as a process exit would: its ends of
    both streams close, so Pilot's reads end and its writes fail."""

    def __init__(self) -> None:
        self.server = MCPServer("in-process-skill")
        self.gone = anyio.Event()
        self.server.tool(name="echo")(self._echo)
        self.server.tool(name="die")(self._die)

    async def _echo(self, value: str = "") -> dict[str, Any]:
        return {"value": value}

    async def _die(self) -> dict[str, Any]:
        self.gone.set()
        await anyio.sleep_forever()
        return {}

    def exit(self) -> None:
        self.gone.set()

    @asynccontextmanager
    async def stdio_client(self, params: object, errlog: object) -> AsyncIterator[tuple[Any, Any]]:
        """Stands in for the SDK's ``stdio_client``: streams to this server instead of a process."""
        to_server, server_reads = anyio.create_memory_object_stream[SessionMessage](0)
        server_writes, to_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        lowlevel = self.server._lowlevel_server

        async def serve(scope: anyio.CancelScope) -> None:
            with scope:
                await lowlevel.run(server_reads, server_writes, lowlevel.create_initialization_options())

        async def end_when_gone(scope: anyio.CancelScope) -> None:
            await self.gone.wait()
            scope.cancel()
            server_reads.close()
            server_writes.close()

        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(serve, scope)
            group.start_soon(end_when_gone, scope)
            try:
                yield to_client, to_server
            finally:
                self.gone.set()


@pytest.fixture
async def skill(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Skill, SkillSession]]:
    fake = Skill()
    monkeypatch.setattr(session_module, "stdio_client", fake.stdio_client)
    session = SkillSession(SkillCommand("aiops", ("vmware-aiops-mcp",), "setting"), env={})
    await session.start(10)
    try:
        yield fake, session
    finally:
        await session.close()


async def test_a_server_gone_between_calls_means_nothing_was_sent(skill: tuple[Skill, SkillSession]) -> None:
    fake, session = skill
    answered = await session.call("echo", {"value": "a"}, 10)
    assert answered.structured_content == {"value": "a"}

    fake.exit()
    while session.alive:
        await anyio.sleep(0.01)

    with pytest.raises(SessionClosed, match=r"had exited before echo was sent.*nothing was run"):
        await session.call("echo", {"value": "b"}, 10)


async def test_a_server_gone_during_a_call_leaves_its_effect_unknown(
    skill: tuple[Skill, SkillSession],
) -> None:
    _, session = skill

    with pytest.raises(EffectUnknown, match=r"ended while running die.*UNKNOWN") as caught:
        await session.call("die", {}, 10)
    assert not isinstance(caught.value, SessionClosed)
