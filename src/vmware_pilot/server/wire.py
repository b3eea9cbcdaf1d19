"""The JSON-RPC edges of one connection, between the transport and the SDK's session.

``guard(lowlevel, on_end)`` wraps the low-level server's ``run`` (used by stdio, streamable HTTP
and the in-memory transport alike) so that every connection:

* answers a request whose method this server does not know (e.g. a newer protocol's
  ``server/discover``) with ``-32601 Method not found`` and one DEBUG log line, instead of the
  SDK's ``-32602`` and a multi-line warning; an unknown notification is dropped the same way;
* sends nothing in reply to a request the client cancelled (``notifications/cancelled``): the
  SDK's ``Request cancelled`` error and any later response for that id are dropped, as the
  protocol says a cancelled request gets no response;
* has a ``Connection`` (``current_connection()`` inside its handlers) holding its log level and
  identity for subscriptions; ``on_end(connection)`` runs when the connection ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from vmware_pilot.server.sdk import RunFn, wrap_run

__all__ = ["Connection", "current_connection", "guard"]

_log = logging.getLogger("vmware_pilot.server")


def _methods(union: Any) -> frozenset[str]:
    """The ``method`` literals of every member of a root-model union of requests or notifications."""
    out: set[str] = set()
    for member in typing.get_args(union.model_fields["root"].annotation):
        out.update(typing.get_args(member.model_fields["method"].annotation))
    return frozenset(out)


KNOWN_REQUESTS = _methods(types.ClientRequest)
KNOWN_NOTIFICATIONS = _methods(types.ClientNotification)


@dataclass(eq=False)
class Connection:
    """One client connection: identity for subscriptions, the log level it set, cancelled ids."""

    log_level: types.LoggingLevel | None = None
    cancelled: set[types.RequestId] = field(default_factory=set)


_current: contextvars.ContextVar[Connection | None] = contextvars.ContextVar("pilot_connection", default=None)


def current_connection() -> Connection:
    """The connection whose request is being handled (a fresh one outside any)."""
    return _current.get() or Connection()


Reader = MemoryObjectReceiveStream[SessionMessage | Exception]
Writer = MemoryObjectSendStream[SessionMessage]


async def _inbound(
    source: Reader, sink: MemoryObjectSendStream[SessionMessage | Exception], reply: Writer, conn: Connection
) -> None:
    # The transport closes ``source`` when the connection ends (an HTTP session ended by DELETE):
    # that ends this loop like the SDK's own receive loop, not the session with an error.
    async with sink:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for item in source:
                message = item.message.root if isinstance(item, SessionMessage) else None
                if isinstance(message, types.JSONRPCRequest) and message.method not in KNOWN_REQUESTS:
                    _log.debug("unknown method %.80s answered with Method not found", message.method)
                    error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                    jsonrpc = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await reply.send(SessionMessage(types.JSONRPCMessage(jsonrpc)))
                    continue
                if isinstance(message, types.JSONRPCNotification):
                    if message.method not in KNOWN_NOTIFICATIONS:
                        _log.debug("unknown notification %.80s dropped", message.method)
                        continue
                    if message.method == "notifications/cancelled" and isinstance(message.params, dict):
                        request_id = message.params.get("requestId")
                        if isinstance(request_id, str | int):
                            conn.cancelled.add(request_id)
                await sink.send(item)


async def _outbound(
    source: MemoryObjectReceiveStream[SessionMessage], sink: Writer, conn: Connection
) -> None:
    # Closing ``source`` when the client is gone makes the session's own sends fail as they
    # would without this layer.
    async with source:
        async for item in source:
            message = item.message.root
            if (
                isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
                and message.id in conn.cancelled
            ):
                conn.cancelled.discard(message.id)
                continue
            try:
                await sink.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return


def guard(lowlevel: Server[Any, Any], on_end: Callable[[Connection], None]) -> None:
    """Wrap ``lowlevel.run`` with the edges above (see the module docstring)."""
    wrap_run(lowlevel, lambda original: _guarded_run(original, on_end))


def _guarded_run(original: RunFn, on_end: Callable[[Connection], None]) -> RunFn:
    async def run(read_stream: Reader, write_stream: Writer, *args: Any, **kwargs: Any) -> Any:
        conn = Connection()
        token = _current.set(conn)
        to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with read_stream, write_stream, anyio.create_task_group() as tg:
                tg.start_soon(_inbound, read_stream, to_server, write_stream, conn)
                tg.start_soon(_outbound, from_server, write_stream, conn)
                try:
                    async with server_reads, server_writes:
                        return await original(server_reads, server_writes, *args, **kwargs)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            _current.reset(token)
            on_end(conn)

    return run
