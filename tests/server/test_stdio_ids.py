"""Every request over stdio gets an answer with its id, driven through the Python SDK's client
against a real `vmware-pilot mcp` process (slow tier; in the fast tier the SDK's ``ClientSession``
on ``serve_stdio`` in this process).

The SDK's client writes ``id`` last, after ``params``; a request over the size limit must still be
answered with that id, or the client waits for ever. What the SDK cannot send itself (a request
nested 1,000 deep, ids JSON-RPC does not allow) goes through a small stdio transport that hands the
SDK's ``ClientSession`` every line the server writes and can put a raw line on the server's stdin.
``anyio.fail_after`` only guards against a hang; nothing here is timed. The cheap checks of the
same rules (``line_id``, ``answer_line``) are in test_stdio_framing.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

from tests.support import stdio
from tests.support.server_proc import PILOT, clean_env
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.transports.stdio import INVALID_REQUEST, PARSE_ERROR

GUARD = 60  # seconds: a hang guard, not a timing assertion
DEEP = "[" * 1000 + "]" * 1000
PLACEHOLDER = "@@deep@@"


async def _alive(session: ClientSession) -> None:
    """The session goes on: a tool call is answered as a result."""
    listed = await session.call_tool("list_workflows", {})
    assert listed.is_error is False and listed.structured_content is not None


async def _a_5_mb_request_is_answered_with_its_id(session: ClientSession) -> None:
    goal = "g" * (5 * 1024 * 1024)
    with pytest.raises(MCPError) as refused:
        await session.call_tool("design_workflow", {"goal": goal})
    assert refused.value.error.code == INVALID_REQUEST
    assert str(MAX_REQUEST_BYTES) in refused.value.error.message
    await _alive(session)
    # Nothing of the long line was taken as a request: no draft was designed.
    listed = await session.call_tool("list_workflows", {})
    assert listed.structured_content is not None and listed.structured_content["active_workflows"] == []


async def test_a_5_mb_request_from_the_sdk_session_is_answered_with_its_id_in_process(tmp_path: Path) -> None:
    """The SDK's ``ClientSession`` on ``serve_stdio`` in this process, over pipes."""
    with stdio.in_process(tmp_path) as raw:
        with anyio.fail_after(GUARD):
            async with stdio.sdk_session(raw) as session:
                await _a_5_mb_request_is_answered_with_its_id(session)


@pytest.mark.slow
async def test_a_5_mb_request_from_the_sdk_client_is_answered_with_its_id(tmp_path: Path) -> None:
    """The same through the SDK's own stdio client and a real `vmware-pilot mcp` process."""
    params = StdioServerParameters(command=str(PILOT), args=["mcp"], env=clean_env(tmp_path))
    with anyio.fail_after(GUARD):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await _a_5_mb_request_is_answered_with_its_id(session)


class RawStdio:
    """A stdio transport for the SDK's ``ClientSession`` that also writes raw lines.

    Every line the server writes is kept (``lines``) and handed to the session; ``rewrite`` may
    change the text of what the session sends (to put in what the SDK cannot serialise)."""

    def __init__(self, process: Process, rewrite: Callable[[str], str]) -> None:
        self.process = process
        self.rewrite = rewrite
        self.lines: list[dict[str, Any]] = []
        self.arrived = anyio.Event()
        self._lock = anyio.Lock()

    async def send_raw(self, line: bytes) -> None:
        assert self.process.stdin is not None
        async with self._lock:
            await self.process.stdin.send(line + b"\n")

    async def wait_for(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            for line in self.lines:
                if match(line):
                    return line
            self.arrived = anyio.Event()
            await self.arrived.wait()

    async def pump_out(self, sink: Any) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async with sink:
            async for chunk in self.process.stdout:
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    self.lines.append(json.loads(line))
                    self.arrived.set()
                    try:  # as the SDK's stdio client does (its model has no null id)
                        await sink.send(
                            SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
                        )
                    except ValidationError as exc:
                        await sink.send(exc)

    async def pump_in(self, source: Any) -> None:
        async with source:
            async for message in source:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await self.send_raw(self.rewrite(text).encode())


@asynccontextmanager
async def raw_session(
    home: Path, rewrite: Callable[[str], str] = lambda text: text
) -> AsyncIterator[tuple[ClientSession, RawStdio]]:
    to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    session_writes, to_server = anyio.create_memory_object_stream[SessionMessage](100)
    async with (
        await anyio.open_process([str(PILOT), "mcp"], env=clean_env(home), stderr=None) as process,
        anyio.create_task_group() as tasks,
    ):
        raw = RawStdio(process, rewrite)
        tasks.start_soon(raw.pump_out, to_session)
        tasks.start_soon(raw.pump_in, to_server)
        try:
            async with ClientSession(session_reads, session_writes) as session:
                await session.initialize()
                yield session, raw
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(20):
                await process.wait()
            if process.returncode is None:
                process.kill()
            tasks.cancel_scope.cancel()


BAD_IDS = ["{}", "[1]", "1.5", "true", "null", '{"id":3}', "1e400"]


@pytest.mark.slow
async def test_a_request_whose_id_is_no_id_gets_an_invalid_request_with_a_null_id(tmp_path: Path) -> None:
    with anyio.fail_after(GUARD):
        async with raw_session(tmp_path) as (session, raw):
            for bad_id in BAD_IDS:
                seen = len(raw.lines)
                await raw.send_raw(f'{{"jsonrpc":"2.0","method":"tools/list","id":{bad_id}}}'.encode())
                answer = await raw.wait_for(
                    lambda line, seen=seen: line in raw.lines[seen:] and "error" in line
                )
                assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST, (bad_id, answer)
                assert "string or an integer" in answer["error"]["message"]
                await _alive(session)


@pytest.mark.slow
async def test_a_request_nested_1000_deep_is_answered_with_its_id(tmp_path: Path) -> None:
    # The SDK's client cannot serialise 1,000 levels: the transport puts them in for it, so the
    # request (and the id it waits for) is the session's own; once with the id last (as the SDK
    # writes it), once with it first.
    id_first = False

    def deepen(text: str) -> str:
        if PLACEHOLDER not in text:
            return text
        if id_first:
            body = json.loads(text)
            text = json.dumps({"id": body.pop("id"), **body})
        return text.replace(f'"{PLACEHOLDER}"', DEEP)

    with anyio.fail_after(GUARD):
        async with raw_session(tmp_path, deepen) as (session, raw):
            for id_first in (False, True):  # noqa: B007 (read by deepen)
                with pytest.raises(MCPError) as refused:
                    await session.call_tool("create_workflow", {"steps": PLACEHOLDER})
                assert refused.value.error.code in (PARSE_ERROR, INVALID_REQUEST)
                assert "nested too deeply" in refused.value.error.message
                await _alive(session)
            answered = [line["id"] for line in raw.lines if "error" in line]
            assert len(answered) == 2 and all(isinstance(i, int) for i in answered), answered


@pytest.mark.slow
async def test_a_request_over_the_limit_with_its_id_last_is_answered_with_it(tmp_path: Path) -> None:
    # Also past a long string holding `"id": 5` and a nested object after `params`.
    def oversize(text: str) -> str:
        body = json.loads(text)
        if body.get("params", {}).get("name") != "design_workflow":
            return text
        request_id = body.pop("id")
        body["params"]["arguments"]["goal"] = '"id": 5}' + "x" * (2 * MAX_REQUEST_BYTES)
        return json.dumps({**body, "extra": {"a": ["}", {"id": 6}]}, "id": request_id})

    with anyio.fail_after(GUARD):
        async with raw_session(tmp_path, oversize) as (session, raw):
            with pytest.raises(MCPError) as refused:
                await session.call_tool("design_workflow", {"goal": "g"})
            assert refused.value.error.code == INVALID_REQUEST
            answered = [line["id"] for line in raw.lines if "error" in line]
            assert answered and answered[-1] not in (5, 6, None)
            await _alive(session)
