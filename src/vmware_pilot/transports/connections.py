"""Connection-level guards for the HTTP transport: read deadlines and a cap per client address.

uvicorn closes a kept-alive connection that stays idle after a response, but it never closes one
that connects and then sends its request slowly or not at all, so a few hundred half-open
connections (slowloris) could hold the server's descriptors for ever. ``guarded_protocol`` makes
an h11 protocol class for uvicorn that:

- closes a connection whose request headers are not complete ``header_timeout`` seconds after it
  connected (or after the first byte of the next request on a kept-alive connection);
- closes a connection whose request body is not complete ``body_timeout`` seconds after its
  headers arrived;
- answers 503 and closes a new connection from an address that already has ``per_client``
  connections open (behind a proxy every client shares the proxy's address).

A deadline is total, not reset by each byte, so trickling bytes does not keep a connection open.
A response being written (a long run, an event stream) is never cut: the deadlines only cover
reading what the client sends.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionLimits", "guarded_protocol"]

_log = logging.getLogger("vmware_pilot.http")

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TOO_MANY_BODY = b"Too many connections from your address"
_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: " + str(len(_TOO_MANY_BODY)).encode() + b"\r\n\r\n" + _TOO_MANY_BODY
)


@dataclass(frozen=True)
class ConnectionLimits:
    """Seconds to send a request's headers, seconds to send its body, connections per address."""

    header_timeout: float
    body_timeout: float
    per_client: int


class _OpenConnections:
    """Open connections per client address (one event loop: no locking needed)."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        self._open: dict[str, int] = {}
        self._warned: set[str] = set()

    def admit(self, address: str) -> bool:
        count = self._open.get(address, 0)
        if count >= self.per_client:
            if address not in self._warned:  # once per episode, not once per refused connection
                self._warned.add(address)
                _log.warning("refusing connections from %s: %d already open", address, count)
            return False
        self._open[address] = count + 1
        return True

    def release(self, address: str) -> None:
        count = self._open.get(address, 0) - 1
        if count > 0:
            self._open[address] = count
        else:
            self._open.pop(address, None)
        if count < self.per_client:
            self._warned.discard(address)


class _GuardedH11Protocol(H11Protocol):
    limits: ClassVar[ConnectionLimits]
    open_connections: ClassVar[_OpenConnections]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading_body = False
        self._address: str | None = None

    # --- connection ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if not self.open_connections.admit(address):
            transport.write(_TOO_MANY)
            transport.close()
            return
        self._address = address
        self._arm(body=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._address is not None:
            self.open_connections.release(self._address)
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm(body=False)  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have started

    # --- deadlines ----------------------------------------------------------------------------
    def _follow(self) -> None:
        """Keep the deadline that matches what the client still owes us."""
        if self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if not self._reading_body:
                self._arm(body=True)
        elif state is h11.IDLE:
            if self._deadline is None and self.conn.trailing_data[0]:
                self._arm(body=False)
        else:
            self._disarm()

    def _arm(self, *, body: bool) -> None:
        self._disarm()
        self._reading_body = body
        seconds = self.limits.body_timeout if body else self.limits.header_timeout
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._reading_body = False

    def _expire(self) -> None:
        what = "body" if self._reading_body else "headers"
        self._deadline = None
        if self.transport.is_closing():
            return
        _log.debug("closing a connection from %s: request %s not received in time", self._address, what)
        if self.conn.our_state is h11.IDLE:  # no response started: say why before closing
            self.transport.write(_TIMED_OUT)
        self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """An h11 protocol class for uvicorn's ``http`` option enforcing ``limits`` (one per server)."""
    return type(
        "GuardedH11Protocol",
        (_GuardedH11Protocol,),
        {"limits": limits, "open_connections": _OpenConnections(limits.per_client)},
    )
