"""One MCP client session to one skill server over stdio, owned by a background task.

The SDK's stdio client and session are context managers that must open and close in one task;
``SkillSession`` keeps them in an owner task, so calls from any task can share the session.
Start-up or handshake failure means nothing was sent (``DispatchRefused``), and so does a server
that exited while the session was idle (``SessionClosed``); a timeout or a lost connection after
the request went out means the effect is unknown (``EffectUnknown``).

The client is the 2.x SDK's ``ClientSession``; its ``initialize`` is the 2025-era handshake, which
the skills' 1.x servers speak. The 2.x client reports a connection closed before the request was
written and one closed while it was in flight with one error (``CONNECTION_CLOSED``), so the
session counts the ``tools/call`` requests its transport took (``_CountedWrites``) to tell them
apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TextIO

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    JSONRPCRequest,
    PaginatedRequestParams,
)

from vmware_pilot import telemetry
from vmware_pilot.dispatch.locate import SkillCommand
from vmware_pilot.errors import DispatchRefused, EffectUnknown

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import WriteStream  # the stdio client's declared type (not exported)

__all__ = ["SessionClosed", "SkillSession"]

_log = logging.getLogger(__name__)


def _first_line(exc: BaseException) -> str:
    leaf: BaseException = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    text = str(leaf).strip().splitlines()[0] if str(leaf).strip() else ""
    return f"{type(leaf).__name__}: {text[:200]}" if text else type(leaf).__name__


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class SkillLog:
    """Where a skill server's stderr goes: a pipe whose lines become Pilot log records at DEBUG
    under a logger of their own (``vmware_pilot.skill.<skill>``: raise it to see a skill's
    chatter), so a skill's chatter and tracebacks (a skill prints one for an ordinary refusal)
    neither fill Pilot's log nor reach the terminal of an operator running ``vmware-pilot run``.
    The last line is kept for the one-line WARNING when the skill fails to start."""

    def __init__(self, skill: str) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w")
        self.last = ""
        self._log = logging.getLogger(f"vmware_pilot.skill.{skill}")
        self._thread = threading.Thread(target=self._forward, args=(read_fd,), daemon=True)
        self._thread.start()

    def _forward(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                line = _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()
                if line.strip():
                    self.last = line.strip()[:300]
                    self._log.debug("%s", line[:2000])

    def finished(self, within: float) -> str:
        """The last line the skill wrote, once its stderr ended (or ``within`` seconds passed)."""
        self._thread.join(within)
        return self.last

    def close(self) -> None:
        """Close Pilot's end; the reader ends when the server's copy closes too (it exited)."""
        with contextlib.suppress(OSError):
            self.writer.close()


class _CountedWrites:
    """The transport's write stream, counting the ``tools/call`` requests it took."""

    def __init__(self, stream: WriteStream[SessionMessage]) -> None:
        self.stream = stream
        self.calls_sent = 0

    @property
    def connected(self) -> bool:
        """False once the server's end is gone (the stdio client's memory stream says so; any
        other stream is taken as connected, and a send on it then reports the closure)."""
        if not isinstance(self.stream, MemoryObjectSendStream):
            return True
        stats = self.stream.statistics()
        return stats.open_send_streams > 0 and stats.open_receive_streams > 0

    async def send(self, item: SessionMessage, /) -> None:
        await self.stream.send(item)
        message = item.message
        if isinstance(message, JSONRPCRequest) and message.method == "tools/call":
            self.calls_sent += 1

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class SessionClosed(DispatchRefused):
    """The server had exited before the request was written: nothing was sent, a new one may retry."""


class SkillSession:
    """A started skill server with an initialized client session."""

    def __init__(self, command: SkillCommand, env: dict[str, str] | None = None) -> None:
        self.command = command
        self.env = env
        self.busy = False
        self.last_used = time.monotonic()
        self.server_info = ""
        self.calls = 0
        self._session: ClientSession | None = None
        self._write: _CountedWrites | None = None
        self._writes: _CountedWrites | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._errlog: SkillLog | None = None

    @property
    def alive(self) -> bool:
        """Started, and its server still connected (an exited server closes the session's streams)."""
        if self._session is None or self._task is None or self._task.done() or self._write is None:
            return False
        return self._write.connected

    async def _own(self) -> None:
        params = StdioServerParameters(
            command=self.command.program,
            args=self.command.args,
            env=self.env if self.env is not None else dict(os.environ),
            cwd=str(Path.home()),
        )
        errlog = SkillLog(self.command.skill)
        self._errlog = errlog
        try:
            async with (
                stdio_client(params, errlog=errlog.writer) as (read, raw_write),
                ClientSession(read, write := _CountedWrites(raw_write)) as session,
            ):
                self._writes = write
                init = await session.initialize()
                self.server_info = f"{init.server_info.name} {init.server_info.version}"
                self._write = write
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # recorded for the caller; the owner task must end quietly
            self._failure = exc
        finally:
            errlog.close()
            self._session = None
            self._write = None
            self._ready.set()

    async def start(self, within: float) -> None:
        """Spawn the server and finish the handshake; DispatchRefused if that fails in time."""
        self._task = asyncio.create_task(self._own(), name=f"skill-session-{self.command.skill}")
        try:
            await asyncio.wait_for(self._ready.wait(), within)
        except TimeoutError:
            await self.close()
            await self._summarise(f"no MCP handshake within {within:g} s")
            raise DispatchRefused(
                f"vmware-{self.command.skill}-mcp did not finish the MCP handshake within {within:g} s; "
                "nothing was run",
                hint="Check that the skill starts on its own (run its command by hand), or raise "
                "VMWARE_PILOT_DISPATCH_START_TIMEOUT.",
            ) from None
        if self._session is None:
            cause = _first_line(self._failure) if self._failure else "it exited"
            await self.close()
            await self._summarise(cause)
            raise DispatchRefused(
                f"{self.command.display()} did not start or did not finish the MCP handshake ({cause}); "
                "nothing was run",
                hint="Run the skill's server by hand to see its error, fix its configuration, and retry.",
            )

    async def _summarise(self, cause: str) -> None:
        """One WARNING line for a skill that did not start: the cause and the last line it wrote
        (its whole stderr is at DEBUG under ``vmware_pilot.skill.<skill>``)."""
        last = await asyncio.to_thread(self._errlog.finished, 2.0) if self._errlog is not None else ""
        _log.warning(
            "skill %s did not start (%s)%s",
            self.command.skill,
            cause,
            f"; its last line: {last}" if last else "",
        )

    async def call(self, tool: str, arguments: dict[str, Any], seconds: float) -> CallToolResult:
        """Send one tools/call; EffectUnknown when the answer does not come back."""
        session = self._session
        if session is None:
            raise DispatchRefused(
                f"the session to vmware-{self.command.skill}-mcp is closed; nothing was run"
            )
        self.last_used = time.monotonic()
        self.calls += 1
        parent = telemetry.traceparent()  # with tracing on: the trace goes on in the skill
        params = CallToolRequestParams(name=tool, arguments=arguments)
        if parent:
            params = CallToolRequestParams.model_validate(
                {"name": tool, "arguments": arguments, "_meta": {"traceparent": parent}}
            )
        request = CallToolRequest(params=params)
        writes = self._writes  # kept after the owner task ends, unlike self._write
        sent_before = writes.calls_sent if writes is not None else 0
        try:
            return await session.send_request(request, CallToolResult, request_read_timeout_seconds=seconds)
        except MCPError as exc:
            code = exc.error.code
            written = writes is not None and writes.calls_sent > sent_before
            if code == CONNECTION_CLOSED and not written:
                # The server had exited before the request was written.
                raise SessionClosed(
                    f"vmware-{self.command.skill}-mcp had exited before {tool} was sent "
                    f"({exc.error.message}); nothing was run",
                    hint="Pilot starts the skill again on the next call; check the skill's log if it keeps exiting.",
                ) from exc
            if code == REQUEST_TIMEOUT:
                raise EffectUnknown(
                    f"vmware-{self.command.skill}-mcp did not answer {tool} within {seconds:g} s; the call "
                    "was abandoned and its effect is UNKNOWN",
                    hint="Check the target system; raise VMWARE_PILOT_DISPATCH_TIMEOUT for slow tools.",
                ) from exc
            if code == CONNECTION_CLOSED:
                raise EffectUnknown(
                    f"vmware-{self.command.skill}-mcp ended while running {tool} ({exc.error.message}); "
                    "whether the call took effect is UNKNOWN",
                    hint="Check the target system before retrying or rolling back.",
                ) from exc
            return CallToolResult(
                content=[], structured_content={"error": exc.error.message, "code": code}, is_error=True
            )
        finally:
            self.last_used = time.monotonic()

    async def input_schemas(self, seconds: float) -> dict[str, dict[str, Any]]:
        """Every tool's input schema, by name (``tools/list``, all pages); DispatchRefused on failure."""
        session = self._session
        if session is None:
            raise DispatchRefused(f"the session to vmware-{self.command.skill}-mcp is closed")
        self.last_used = time.monotonic()
        schemas: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        try:
            with anyio.fail_after(seconds):
                for _ in range(100):
                    page = await session.list_tools(
                        params=PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    schemas.update({t.name: dict(t.input_schema) for t in page.tools})
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except (MCPError, TimeoutError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise DispatchRefused(
                f"vmware-{self.command.skill}-mcp did not list its tools ({_first_line(exc)})"
            ) from exc
        finally:
            self.last_used = time.monotonic()
        return schemas

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 5)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
