"""What is worth measuring, told to whoever listens (nothing listens unless a server serves
metrics), and the context log lines are written in.

The engine and the MCP server call ``count`` and ``observe`` with a name of ``NAMES`` and its
labels; with no listener these cost a truth test. ``transports/metrics.py`` listens and keeps
the Prometheus series (a listener per server, removed when that server stops). Values the
database knows (workflows by state, gates waiting, the outbox) are not counted here: the metrics
read them from the database at scrape time, so every replica reports the same truth.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["NAMES", "Listener", "caller", "count", "listen", "observe", "request_id", "workflow_id"]

# The context of what is being done, for the log lines written meanwhile (cli/logs.py): set by the
# MCP server per tool call and by the runner per step; tasks started meanwhile inherit them.
workflow_id: ContextVar[str] = ContextVar("pilot_workflow_id", default="")
request_id: ContextVar[str] = ContextVar("pilot_request_id", default="")
caller: ContextVar[str] = ContextVar("pilot_caller", default="")

# name → (kind, label names). Kinds: "counter" (count) or "histogram" (observe, in seconds).
NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gate_wait_seconds": ("histogram", ("decision",)),
    "gate_decisions": ("counter", ("decision",)),
    "step_duration_seconds": ("histogram", ("skill", "tool", "outcome")),
    "dispatch_errors": ("counter", ("skill", "kind")),
    "refusals": ("counter", ("kind",)),
    "lease_takeovers": ("counter", ()),
    "drift_stops": ("counter", ()),
    "mcp_request_duration_seconds": ("histogram", ("method",)),
}


class Listener(Protocol):
    def count(self, name: str, labels: dict[str, str]) -> None: ...

    def observe(self, name: str, value: float, labels: dict[str, str]) -> None: ...


# Held weakly: a server's metrics that nothing else holds any more stop listening by themselves.
_listeners: weakref.WeakSet[Any] = weakref.WeakSet()


def listen(listener: Listener) -> Callable[[], None]:
    """Start telling ``listener``; returns the function that stops it."""
    _listeners.add(listener)
    return lambda: _listeners.discard(listener)


def count(name: str, **labels: str) -> None:
    for listener in list(_listeners):
        listener.count(name, labels)


def observe(name: str, value: float, **labels: str) -> None:
    for listener in list(_listeners):
        listener.observe(name, value, labels)
