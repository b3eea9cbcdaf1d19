"""Serve the Pilot MCP server on this process's stdin/stdout (stdout is the protocol channel).

The framing is our own rather than the SDK's ``stdio_server`` so that every request gets an answer
with its id: one message per line, at most ``MAX_REQUEST_BYTES`` bytes. A line that is too long is
skipped without being held in memory; a line that is not JSON, is nested too deeply, holds a lone
surrogate or is not a JSON-RPC message is answered with a JSON-RPC error (``-32700`` parse error
or ``-32600`` invalid request). That answer carries the request's id wherever the id stands in the
line (``line_id``: the MCP SDKs write it last, after a long ``params``), found by reading only the
first and last ``_ID_WINDOW`` bytes of the line; a message whose ``id`` is not a string or an
integer (``{}``, ``[1]``, ``1.5``, ``true``, ``null``) is answered with ``-32600`` and ``id: null``,
as JSON-RPC says. The server then goes on reading. Blank lines are ignored. Bytes that are not
UTF-8 are replaced, as the SDK does.
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
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
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

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "answer_line", "line_id", "serve_stdio", "stdio_loop"]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
# How much of each end of a line is searched for its top-level id (the MCP SDKs write it last,
# after ``params``; others first). Everything between is never held, nor parsed.
_ID_WINDOW: Final = 16384
_DECODER: Final = json.JSONDecoder()
# At the end of stdin, how long requests still unanswered may take before the session ends (runs
# still going then finish in the background; their answers cannot be sent any more).
_EOF_GRACE_SECONDS: Final = 30


def _skip(text: str, at: int) -> int:
    end: int = WHITESPACE.match(text, at).end()
    return end


class _Missing:
    """No top-level ``id`` member was found (as opposed to one whose value is not an id)."""


_MISSING: Final = _Missing()
_NOT_AN_ID: Final = object()  # an id member whose value is an object, an array or unreadable
_SCALAR_CHARS: Final = frozenset("+-.0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _leading(text: str) -> object:
    """The value of the first top-level ``id`` member of the object ``text`` starts with, reading
    member by member from the start; ``_MISSING`` when it is not within ``text``."""
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return _MISSING
    at += 1
    while True:
        try:
            key, at = _DECODER.raw_decode(text, _skip(text, at))
        except (ValueError, RecursionError):
            return _MISSING
        at = _skip(text, at)
        if not text.startswith(":", at):
            return _MISSING
        try:
            value, at = _DECODER.raw_decode(text, _skip(text, at + 1))
        except (ValueError, RecursionError):
            return _NOT_AN_ID if key == "id" else _MISSING
        if key == "id":
            return value
        at = _skip(text, at)
        if not text.startswith(",", at):
            return _MISSING
        at += 1


def _back_space(text: str, at: int) -> int:
    while at > 0 and text[at - 1] in " \t\r\n":
        at -= 1
    return at


def _ends(text: str, at: int, char: str) -> bool:
    """Whether ``text[:at]`` ends with ``char``."""
    return at > 0 and text[at - 1] == char


def _string_start(text: str, end: int) -> int | None:
    """Where the string whose closing quote is ``text[end - 1]`` opens: the first quote before it
    that no backslash escapes. None when that is not within ``text``."""
    at = end - 1
    while True:
        quote = text.rfind('"', 0, at)
        slashes = quote
        while slashes > 0 and text[slashes - 1] == "\\":
            slashes -= 1
        if quote <= 0 or slashes == 0:
            return None  # ran into the start of the window: cannot tell
        if (quote - slashes) % 2 == 0:
            return quote
        at = slashes


def _value_start(text: str, end: int) -> int | None:
    """Where the JSON value ending at ``end`` starts (a string, an object or array, a scalar)."""
    last = text[end - 1]
    if last == '"':
        return _string_start(text, end)
    if last in "}]":
        depth, at = 0, end
        while at > 0:
            char = text[at - 1]
            if char == '"':
                opened = _string_start(text, at)
                if opened is None:
                    return None
                at = opened
                continue
            at -= 1
            if char in "}]":
                depth += 1
            elif char in "{[":
                depth -= 1
                if depth == 0:
                    return at
        return None
    at = end
    while at > 0 and text[at - 1] in _SCALAR_CHARS:
        at -= 1
    return at if at < end else None


def _trailing(text: str) -> object:
    """The value of the last top-level ``id`` member of the object ``text`` ends with, reading
    member by member back from the end; ``_MISSING`` when it is not within ``text``."""
    at = _back_space(text, len(text))
    if not _ends(text, at, "}"):
        return _MISSING
    at = _back_space(text, at - 1)
    while at > 0:
        start = _value_start(text, at)
        if start is None:
            return _MISSING
        value_end, at = at, _back_space(text, start)
        if not _ends(text, at, ":"):
            return _MISSING
        at = _back_space(text, at - 1)
        if not _ends(text, at, '"'):
            return _MISSING
        key_start = _string_start(text, at)
        if key_start is None:
            return _MISSING
        try:
            key = json.loads(text[key_start:at])
        except ValueError:
            return _MISSING
        if key == "id":
            try:
                return json.loads(text[start:value_end]) if text[start] not in "{[" else _NOT_AN_ID
            except ValueError:
                return _NOT_AN_ID
        at = _back_space(text, key_start)
        if not _ends(text, at, ","):
            return _MISSING  # the object's "{" (no id in it), or not an object member at all
        at = _back_space(text, at - 1)
    return _MISSING


def line_id(head: bytes, tail: bytes = b"") -> str | int | None:
    """The top-level ``id`` of the JSON object on a line that starts with ``head`` and ends with
    ``tail`` (each at most ``_ID_WINDOW`` bytes; a short line is both), or None when it has none
    or its value is not a JSON-RPC id (a string or an integer).

    Read member by member from the end (where the MCP SDKs write it), then from the start;
    strings are skipped whole, so an ``"id"`` inside a string or a nested object is never taken."""
    found = _trailing(tail.decode("utf-8", errors="replace")) if tail else _MISSING
    if found is _MISSING:
        found = _leading(head.decode("utf-8", errors="replace"))
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


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
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        problem = _problem(exc)
    else:
        if isinstance(message, types.JSONRPCNotification) and '"id"' in text and _has_id(text):
            # The SDK reads a request whose id is no id as a notification: it would get no answer.
            return error_line(
                None, INVALID_REQUEST, "Invalid Request: the id of a request must be a string or an integer"
            )
        return SessionMessage(message)
    stripped = line.strip()
    request_id = line_id(stripped[:_ID_WINDOW], stripped[-_ID_WINDOW:])
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return error_line(request_id, PARSE_ERROR, f"Parse error: {problem}")
    if problem.startswith("the JSON cannot be read"):
        # Python reads it but the SDK's parser does not: an escape that is no Unicode character.
        problem = (
            "the JSON holds an escape that is not a Unicode character (a lone surrogate such as \\ud800)"
        )
    return error_line(request_id, INVALID_REQUEST, f"Invalid Request: {problem}")


def _has_id(text: str) -> bool:
    """Whether the JSON object ``text`` has a top-level ``id`` member."""
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(loaded, dict) and "id" in loaded


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
        """Read past the rest of a too-long line (keeping only its two ends) and answer it with
        the id found in them."""
        size, chunk, tail = len(start), start, start[-_ID_WINDOW:]
        while chunk and not chunk.endswith(b"\n"):
            chunk = await channel.readline(MAX_REQUEST_BYTES)
            size += len(chunk)
            tail = (tail + chunk)[-_ID_WINDOW:]
        message = (
            f"Invalid Request: the message has {size} bytes or more; the limit is "
            f"{MAX_REQUEST_BYTES} bytes per message"
        )
        request_id = line_id(start.lstrip()[:_ID_WINDOW], tail.rstrip())
        await emit(error_line(request_id, INVALID_REQUEST, message))

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
                    root = answer.message
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
                root = message.message
                await emit(root.model_dump_json(by_alias=True, exclude_unset=True))
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


async def serve_stdio(
    app: PilotApp | AppOnDemand, actor: Actor, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Serve until the client closes stdin, then let runs still going finish; the caller closes ``app``.

    An ``AppOnDemand`` is built by the first tool call, so `initialize` waits for none of it.
    ``stdin``/``stdout`` are the process's own unless given (tests serve other files in-process)."""
    source = app if isinstance(app, AppOnDemand) else AppOnDemand.ready(app)
    server = create_server(source, actor=actor)
    try:
        await stdio_loop(
            lambda read, write: run_on_streams(server, read, write),
            stdin or sys.stdin.buffer,
            stdout or sys.stdout.buffer,
        )
    finally:
        await server.drain()  # the calls carried for tasks, so that their results are recorded
        built = source.built
        if built is not None:
            await built.service.drain()
