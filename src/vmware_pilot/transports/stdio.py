"""Serve the Pilot MCP server on this process's stdin/stdout (stdout is the protocol channel).

The framing is our own rather than the SDK's ``stdio_server`` so that every line gets an answer:
one message per line, at most ``MAX_REQUEST_BYTES`` bytes. A line that is too long is skipped
without being held in memory; a line that is not JSON, is nested too deeply, holds a lone
surrogate or is not a JSON-RPC message is answered with a JSON-RPC error (``-32700`` parse error
or ``-32600`` invalid request) carrying the request's id when it can be read, else ``null``.
The server then goes on reading. Blank lines are ignored. Bytes that are not UTF-8 are replaced,
as the SDK does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from json.decoder import WHITESPACE  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import excerpt
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.ondemand import AppOnDemand
from vmware_pilot.server import create_server
from vmware_pilot.server.sdk import run_on_streams

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "answer_line", "leading_id", "serve_stdio", "stdio_loop"]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
# How much of a too-long line is kept to find its id (the id comes first in what clients send).
_ID_PREFIX: Final = 4096
_DECODER: Final = json.JSONDecoder()
# At the end of stdin, how long requests still unanswered may take before the session ends (runs
# still going then finish in the background; their answers cannot be sent any more).
_EOF_GRACE_SECONDS: Final = 30


def _skip(text: str, at: int) -> int:
    end: int = WHITESPACE.match(text, at).end()
    return end


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def leading_id(prefix: bytes) -> str | int | None:
    """The top-level ``id`` of a JSON object that starts with ``prefix``, if it is in the prefix."""
    text = prefix.decode("utf-8", errors="replace")
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return None
    at += 1
    while True:
        try:
            key, at = _DECODER.raw_decode(text, _skip(text, at))
            at = _skip(text, at)
            if not text.startswith(":", at):
                return None
            value, at = _DECODER.raw_decode(text, _skip(text, at + 1))
        except (ValueError, RecursionError):
            return None
        if key == "id":
            return value if _is_id(value) else None
        at = _skip(text, at)
        if not text.startswith(",", at):
            return None
        at += 1


def error_line(request_id: str | int | None, code: int, message: str) -> str:
    """One JSON-RPC error response (ASCII, no newline)."""
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": excerpt(message, 500)}}
    return json.dumps(body)


def _problem(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_context=False)[0]
    if first["type"] == "json_invalid":
        if "recursion limit" in first["msg"]:
            return "the JSON is nested too deeply"
        return f"the JSON cannot be read ({first['msg']})"
    return "not a JSON-RPC 2.0 request, notification or response"


def answer_line(line: bytes) -> SessionMessage | str | None:
    """The message a line carries, or the error line answering it (None for a blank line)."""
    text = line.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        return SessionMessage(types.JSONRPCMessage.model_validate_json(text))
    except ValidationError as exc:
        problem = _problem(exc)
    try:
        parsed: Any = json.loads(text)
    except (ValueError, RecursionError):
        return error_line(None, PARSE_ERROR, f"Parse error: {problem}")
    if problem.startswith("the JSON cannot be read"):
        # Python reads it but the SDK's parser does not: an escape that is no Unicode character.
        problem = (
            "the JSON holds an escape that is not a Unicode character (a lone surrogate such as \\ud800)"
        )
    request_id = parsed.get("id") if isinstance(parsed, dict) else None
    return error_line(
        request_id if _is_id(request_id) else None, INVALID_REQUEST, f"Invalid Request: {problem}"
    )


ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


async def stdio_loop(
    run: Callable[[ReadStream, WriteStream], Awaitable[None]],
    stdin: BinaryIO,
    stdout: BinaryIO,
) -> None:
    """Frame ``stdin``/``stdout`` for ``run(read_stream, write_stream)`` until stdin ends.

    On asyncio with pipes or sockets at both ends (how an MCP client starts a server), the event
    loop reads and writes them itself; otherwise (a file, a terminal, another event loop) blocking
    reads and writes run in worker threads, as in the SDK's own stdio transport.
    """
    read_send: MemoryObjectSendStream[SessionMessage | Exception]
    read_receive: MemoryObjectReceiveStream[SessionMessage | Exception]
    read_send, read_receive = anyio.create_memory_object_stream(0)
    write_send: MemoryObjectSendStream[SessionMessage]
    write_receive: MemoryObjectReceiveStream[SessionMessage]
    write_send, write_receive = anyio.create_memory_object_stream(0)
    lock = anyio.Lock()
    channel = await _open_channel(stdin, stdout)

    async def emit(text: str) -> None:
        async with lock:
            await channel.write(text.encode("utf-8") + b"\n")

    async def refuse_long(start: bytes) -> None:
        """Read past the rest of a too-long line (keeping nothing of it) and answer it."""
        size, chunk = len(start), start
        while chunk and not chunk.endswith(b"\n"):
            chunk = await channel.readline(MAX_REQUEST_BYTES)
            size += len(chunk)
        message = (
            f"Invalid Request: the message has {size} bytes or more; the limit is "
            f"{MAX_REQUEST_BYTES} bytes per message"
        )
        await emit(error_line(leading_id(start[:_ID_PREFIX]), INVALID_REQUEST, message))

    # Requests read but not answered yet: at the end of stdin they are answered before the
    # session ends (a client may write all its lines and close stdin at once).
    pending: set[object] = set()
    drained = anyio.Event()  # set once stdin has ended and nothing is pending

    def settle(request_id: object) -> None:
        pending.discard(request_id)
        if not pending and ended:
            drained.set()

    ended = False

    async def reader() -> None:
        nonlocal ended
        async with read_send:
            while line := await channel.readline(MAX_REQUEST_BYTES + 1):
                if len(line) > MAX_REQUEST_BYTES and not line.endswith(b"\n"):
                    await refuse_long(line)
                    continue
                answer = answer_line(line)
                if isinstance(answer, SessionMessage):
                    root = answer.message.root
                    if isinstance(root, types.JSONRPCRequest):
                        pending.add(root.id)
                    elif (
                        isinstance(root, types.JSONRPCNotification)
                        and root.method == "notifications/cancelled"
                    ):
                        # A cancelled request gets no answer.
                        settle((root.params or {}).get("requestId"))
                    await read_send.send(answer)
                elif answer is not None:
                    await emit(answer)
            ended = True
            settle(None)
            with anyio.move_on_after(_EOF_GRACE_SECONDS):
                await drained.wait()

    async def writer() -> None:
        async with write_receive:
            async for message in write_receive:
                root = message.message.root
                await emit(message.message.model_dump_json(by_alias=True, exclude_none=True))
                if isinstance(root, types.JSONRPCResponse | types.JSONRPCError):
                    settle(root.id)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader)
            tasks.start_soon(writer)
            await run(read_receive, write_send)
    finally:
        channel.close()


class _Channel(Protocol):
    async def readline(self, limit: int) -> bytes: ...
    async def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...


class _ThreadedChannel:
    """Blocking reads and writes, each in a worker thread."""

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self._stdin, self._stdout = stdin, stdout

    async def readline(self, limit: int) -> bytes:
        return await anyio.to_thread.run_sync(self._stdin.readline, limit)

    def _write(self, data: bytes) -> None:
        self._stdout.write(data)
        self._stdout.flush()

    async def write(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write, data)

    def close(self) -> None:
        pass


class _PipeChannel:
    """The event loop's own non-blocking pipe transports: no thread hand-off per line (each cost
    a worker-thread round trip, a good part of a short call's time). The descriptors are put back
    in blocking mode when the session ends."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fds: tuple[int, int]
    ) -> None:
        self._reader, self._writer, self._fds = reader, writer, fds
        self._buffer = bytearray()
        self._eof = False

    async def readline(self, limit: int) -> bytes:
        """What ``BinaryIO.readline(limit)`` returns: a line, or its first ``limit`` bytes."""
        while True:
            end = self._buffer.find(b"\n", 0, limit)
            if end >= 0 or len(self._buffer) >= limit or self._eof:
                size = end + 1 if end >= 0 else min(limit, len(self._buffer))
                line = bytes(self._buffer[:size])
                del self._buffer[:size]
                return line
            chunk = await self._reader.read(1 << 16)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):  # already closed
                os.set_blocking(fd, True)


def _is_pipe(stream: BinaryIO) -> bool:
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _open_channel(stdin: BinaryIO, stdout: BinaryIO) -> _Channel:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return _ThreadedChannel(stdin, stdout)
    if sys.platform == "win32" or not (_is_pipe(stdin) and _is_pipe(stdout)):
        return _ThreadedChannel(stdin, stdout)  # (Windows: the proactor loop has no such pipes)
    # The transports get duplicates to close; the open files are shared with the originals, whose
    # blocking mode ``close`` restores.
    fds = (stdin.fileno(), stdout.fileno())
    reader = asyncio.StreamReader(limit=1 << 16)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(fds[0]), "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(os.dup(fds[1]), "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return _PipeChannel(reader, writer, fds)


async def serve_stdio(app: PilotApp | AppOnDemand, actor: Actor) -> None:
    """Serve until the client closes stdin, then let runs still going finish; the caller closes ``app``.

    An ``AppOnDemand`` is built by the first tool call, so `initialize` waits for none of it."""
    source = app if isinstance(app, AppOnDemand) else AppOnDemand.ready(app)
    server = create_server(source, actor=actor)
    try:
        await stdio_loop(
            lambda read, write: run_on_streams(server, read, write), sys.stdin.buffer, sys.stdout.buffer
        )
    finally:
        built = source.built
        if built is not None:
            await built.service.drain()
