"""The stdio MCP server spoken to in raw lines, two ways: ``serve_stdio`` in a thread of this
process over a pair of pipes (the fast tier: the same framing, loop and server, the pipes read by
the event loop as in a real start) or a real ``vmware-pilot mcp`` process (slow tier)."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from tests.support.server_proc import PILOT, clean_env

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def serve_files(home: Path, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """What `vmware-pilot mcp` does with its stdin and stdout, on these files in this thread (the
    pilot home is ``home``/.vmware, steps are handed back): serve until stdin ends, close the app."""
    from vmware_pilot.config import Settings
    from vmware_pilot.domain.actor import Actor
    from vmware_pilot.ondemand import AppOnDemand
    from vmware_pilot.transports.stdio import serve_stdio

    async def serve() -> None:
        app = AppOnDemand(Settings(home=home / ".vmware"))
        try:
            await serve_stdio(app, Actor.os_user(), stdin, stdout)
        finally:
            await app.aclose()

    asyncio.run(serve())


class RawStdio:
    """A stdio server spoken to in raw lines; every line it writes must be JSON."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.stdin = stdin
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, args=(stdout,), daemon=True).start()

    def _pump(self, stdout: IO[bytes]) -> None:
        with stdout:
            for line in stdout:
                self.lines.put(line)

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def reply(self, timeout: float = 30) -> dict[str, Any]:
        """The next message it writes (server notifications are skipped)."""
        while True:
            message = json.loads(self.lines.get(timeout=timeout))
            if "method" not in message:
                return message  # type: ignore[no-any-return]

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        self.send(json.dumps(body).encode() + b"\n")
        return self.reply()

    def alive(self, request_id: int) -> None:
        """The server still answers a tool call correctly."""
        answer = self.request(request_id, "tools/call", {"name": "list_workflows", "arguments": {}})
        assert answer["id"] == request_id and answer["result"]["isError"] is False, answer

    def initialize(self) -> None:
        assert self.request(0, "initialize", INIT["params"])["id"] == 0
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


@asynccontextmanager
async def sdk_session(raw: RawStdio) -> AsyncIterator[ClientSession]:
    """The Python SDK's ``ClientSession`` on ``raw``'s lines, framed as the SDK's stdio client
    frames them (one JSON message a line), initialized."""
    to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    session_writes, to_server = anyio.create_memory_object_stream[SessionMessage](100)

    def next_line() -> bytes | None:
        try:
            return raw.lines.get(timeout=0.2)
        except queue.Empty:
            return None

    async def pump_out() -> None:
        async with to_session:
            while True:
                line = await anyio.to_thread.run_sync(next_line, abandon_on_cancel=True)
                if line is not None:
                    await to_session.send(
                        SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
                    )

    async def pump_in() -> None:
        async with to_server:
            async for message in to_server:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await anyio.to_thread.run_sync(raw.send, text.encode() + b"\n")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump_out)
        tasks.start_soon(pump_in)
        async with ClientSession(session_reads, session_writes) as session:
            await session.initialize()
            yield session
        tasks.cancel_scope.cancel()


@contextmanager
def in_process(home: Path) -> Iterator[RawStdio]:
    """``serve_stdio`` in a thread over two pipes; closing its stdin ends it."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    server_in, server_out = (
        os.fdopen(stdin_read, "rb", buffering=0),
        os.fdopen(stdout_write, "wb", buffering=0),
    )
    client_in, client_out = os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb")
    thread = threading.Thread(target=serve_files, args=(home, server_in, server_out), daemon=True)
    thread.start()
    try:
        yield RawStdio(client_in, client_out)
    finally:
        client_in.close()
        thread.join(timeout=20)
        server_in.close()
        server_out.close()  # the reader of its lines sees the end
        assert not thread.is_alive(), "the in-process stdio server did not end with its stdin"


@contextmanager
def entry_point(home: Path) -> Iterator[RawStdio]:
    """A real `vmware-pilot mcp` process; closing its stdin ends it."""
    process = subprocess.Popen(
        [str(PILOT), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=clean_env(home),
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        yield RawStdio(process.stdin, process.stdout)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
