"""What Pilot keeps per connection and per request, between the SDK's runner and the handlers.

The SDK answers an unknown method with ``-32601 Method not found``, drops an unknown notification,
and sends nothing for a request the client cancelled; Pilot adds only:

* ``in_request``, a server middleware (the outermost after the SDK's own) that makes the request
  being handled readable by every handler and transport (``sdk.request_in_flight``): the caller's
  HTTP request, the client's name, the session;
* a ``Connection`` (``current_connection()`` inside a request) holding the log level the client
  set and the identity subscriptions are kept under; ``on_end(connection)`` runs when the
  connection ends. A 2026-07-28 request over HTTP is a connection of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import LoggingLevel

from vmware_pilot.server import sdk

__all__ = ["Connection", "current_connection", "in_request"]

_KEY = "vmware_pilot"


@dataclass(eq=False)
class Connection:
    """One client connection: identity for subscriptions, the log level it set."""

    log_level: LoggingLevel | None = None


async def in_request(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: ``ctx`` is the request in flight while the rest of the chain runs."""
    token = sdk.REQUEST.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        sdk.REQUEST.reset(token)


def current_connection(on_end: Callable[[Connection], None] | None = None) -> Connection:
    """The connection whose request is being handled (a fresh one outside any). ``on_end`` is
    called with it when the connection ends (registered once per connection)."""
    ctx = sdk.request_in_flight()
    if ctx is None:
        return Connection()
    connection = sdk.connection_of(ctx.session)
    state = connection.state.get(_KEY)
    if not isinstance(state, Connection):
        state = connection.state[_KEY] = Connection()
    if on_end is not None:
        ends = connection.state.setdefault(f"{_KEY}.ends", set())
        if on_end not in ends:
            ends.add(on_end)
            connection.exit_stack.callback(on_end, state)
    return state
