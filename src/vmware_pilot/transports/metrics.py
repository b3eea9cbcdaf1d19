"""``/metrics`` in the Prometheus text format, every name under ``pilot_``.

Counters and histograms are this process's (``telemetry`` tells them what happened here): gate
waits and decisions, step durations, dispatch errors, refusals, run-lease takeovers, drift stops
and MCP request durations. What the database knows is read from it at each scrape, so every
replica reports the same: workflows by state, gates waiting, the notification outbox (pending,
oldest age), and whether the database answered (``pilot_database_up``).

On the server's own port ``/metrics`` needs a bearer token whose role is ``admin`` or ``metrics``
(a custom role of roles.yaml); ``--metrics-port`` serves it without a token on an address of its
own, for a scraper on a private network.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from vmware_pilot import telemetry
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.duties import Role
from vmware_pilot.transports.callers import CallerVerifier, actor_of

__all__ = ["METRICS_ROLES", "Metrics", "MetricsEndpoint", "metrics_only_app"]

_log = logging.getLogger("vmware_pilot.metrics")
# No `_created` series beside every counter and histogram: they double the exposition for nothing.
disable_created_metrics()  # type: ignore[no-untyped-call]

METRICS_ROLES = frozenset({"admin", "metrics"})

_HELP = {
    "gate_wait_seconds": "Seconds a gate waited for its decision (approved or rejected), from the run reaching it.",
    "gate_decisions": "Gate decisions: approved, rejected, expired (a gate that expired undecided, counted once when noticed).",
    "step_duration_seconds": "Seconds a dispatched step took, by skill, tool and outcome.",
    "dispatch_errors": "Dispatched steps that failed or whose effect is unknown, by skill and kind.",
    "refusals": "Tool calls refused, by kind (the refusal's `refused` field, else its error class).",
    "lease_takeovers": "Run leases taken over from a Pilot that stopped mid-step.",
    "drift_stops": "Approvals refused because the plan changed since the gate was shown.",
    "write_holds": "Write steps not sent because a check right before them held the run at its gate, by kind (drift, ...).",
    "mcp_request_duration_seconds": "Seconds an MCP request took, by method.",
}
_BUCKETS = {
    # People decide in seconds to days.
    "gate_wait_seconds": (
        1,
        5,
        15,
        30,
        60,
        120,
        300,
        600,
        1800,
        3600,
        7200,
        14400,
        28800,
        86400,
        259200,
        604800,
    ),
    "step_duration_seconds": (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
    "mcp_request_duration_seconds": (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
}


class _DatabaseCollector(Collector):
    """Gauges read from the database at scrape time."""

    def __init__(self, app: PilotApp) -> None:
        self.app = app

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("pilot_database_up", "1 when the database answered this scrape.")
        try:
            gauges = self.app.sql.gauges()
        except PilotError as exc:
            _log.debug("metrics: the database did not answer: %s", exc.message)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        states = GaugeMetricFamily(
            "pilot_workflows", "Workflows in the database, by state.", labels=["state"]
        )
        for state in WorkflowState:
            states.add_metric([state.value], gauges.workflows_by_state.get(state.value, 0))
        yield states
        yield GaugeMetricFamily(
            "pilot_gates_waiting",
            "Workflows waiting at an approval gate.",
            value=gauges.workflows_by_state.get(WorkflowState.AWAITING_APPROVAL.value, 0),
        )
        yield GaugeMetricFamily(
            "pilot_outbox_pending", "Notifications waiting to be delivered.", value=gauges.outbox_pending
        )
        yield GaugeMetricFamily(
            "pilot_outbox_oldest_age_seconds",
            "Seconds since the oldest pending notification was queued (0: none pending).",
            value=gauges.outbox_oldest_age,
        )


class Metrics:
    """One server's metrics: a registry of its own, listening to ``telemetry`` until ``close``."""

    def __init__(self, app: PilotApp) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._series: dict[str, Any] = {}
        for name, (kind, labels) in telemetry.NAMES.items():
            if kind == "counter":
                self._series[name] = Counter(f"pilot_{name}", _HELP[name], labels, registry=self.registry)
            else:
                self._series[name] = Histogram(
                    f"pilot_{name}", _HELP[name], labels, buckets=_BUCKETS[name], registry=self.registry
                )
        self.registry.register(_DatabaseCollector(app))
        self._stop = telemetry.listen(self)

    def count(self, name: str, labels: dict[str, str]) -> None:
        series = self._series.get(name)
        if series is not None:
            (series.labels(**labels) if labels else series).inc()

    def observe(self, name: str, value: float, labels: dict[str, str]) -> None:
        series = self._series.get(name)
        if series is not None:
            (series.labels(**labels) if labels else series).observe(value)

    async def text(self) -> bytes:
        """The exposition (the database is asked in a thread)."""
        return await asyncio.to_thread(generate_latest, self.registry)

    def close(self) -> None:
        self._stop()


async def _send(
    send: Send, status: int, body: bytes, content_type: str, extra: list[tuple[bytes, bytes]]
) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class MetricsEndpoint:
    """``GET /metrics`` for a caller whose token's role is in ``METRICS_ROLES``; 401 / 403 otherwise."""

    def __init__(
        self, metrics: Metrics, verifier: CallerVerifier | None, role_of: Callable[[Actor], Role]
    ) -> None:
        self.metrics = metrics
        self.verifier = verifier
        self.role_of = role_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, b"Method Not Allowed", "text/plain", [])
            return
        if self.verifier is not None:
            refusal = await self._refusal(Headers(scope=scope).get("authorization", ""))
            if refusal is not None:
                status, message = refusal
                challenge = [(b"www-authenticate", b"Bearer")] if status == 401 else []
                await _send(send, status, message.encode(), "text/plain; charset=utf-8", challenge)
                return
        body = await self.metrics.text()
        await _send(send, 200, b"" if scope["method"] == "HEAD" else body, CONTENT_TYPE_LATEST, [])

    async def _refusal(self, authorization: str) -> tuple[int, str] | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401, "metrics need a bearer token whose role is admin or metrics\n"
        assert self.verifier is not None
        verified = await self.verifier.verify_token(token.strip())
        if verified is None:
            return 401, "the bearer token is not valid\n"
        actor = actor_of(verified)
        try:
            role = self.role_of(actor)
        except PilotError:
            role = None
        if role is None or role.name not in METRICS_ROLES:
            _log.warning("refused /metrics for %s: role is not admin or metrics", actor.label)
            return 403, "metrics need the role admin or metrics\n"
        return None


def metrics_only_app(metrics: Metrics) -> ASGIApp:
    """The app of ``--metrics-port``: ``/metrics`` without a token, 404 for anything else."""
    endpoint = MetricsEndpoint(metrics, None, lambda actor: Role("metrics", "none"))

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"].rstrip("/") != "/metrics":
            await _send(send, 404, b"Not Found: only /metrics is served here\n", "text/plain", [])
            return
        await endpoint(scope, receive, send)

    return asgi
