"""What is worth measuring, told to whoever listens (nothing listens unless a server serves
metrics), the context log lines are written in, and the spans of a trace (none unless
OpenTelemetry is configured: ``adapters/otel.py`` installs a tracer; without one a span is a
``nullcontext`` and OpenTelemetry is never imported).

The engine and the MCP server call ``count`` and ``observe`` with a name of ``NAMES`` and its
labels; with no listener these cost a truth test. ``transports/metrics.py`` listens and keeps
the Prometheus series (a listener per server, removed when that server stops). Values the
database knows (workflows by state, gates waiting, the outbox) are not counted here: the metrics
read them from the database at scrape time, so every replica reports the same truth.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Literal, Protocol

__all__ = [
    "NAMES",
    "Listener",
    "Tracer",
    "caller",
    "count",
    "listen",
    "observe",
    "request_id",
    "span",
    "trace_with",
    "traceparent",
    "workflow_id",
]

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
    "write_holds": ("counter", ("kind",)),
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


SpanKind = Literal["server", "client", "internal"]


class Tracer(Protocol):
    def span(
        self, name: str, kind: SpanKind, attributes: Mapping[str, Any], parent: str
    ) -> contextlib.AbstractContextManager[Any]: ...

    def traceparent(self) -> str: ...


_tracer: Tracer | None = None


def trace_with(tracer: Tracer | None) -> None:
    """Make ``tracer`` the one spans go to (None: tracing off)."""
    global _tracer
    _tracer = tracer


def span(
    name: str, kind: SpanKind = "internal", attributes: Mapping[str, Any] | None = None, parent: str = ""
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block while tracing is on (``parent``: a W3C traceparent to continue);
    yields the span, or None when tracing is off."""
    if _tracer is None:
        return contextlib.nullcontext()
    return _tracer.span(name, kind, attributes or {}, parent)


def traceparent() -> str:
    """The W3C traceparent of the current span, for the next process ('' when tracing is off)."""
    return _tracer.traceparent() if _tracer is not None else ""
