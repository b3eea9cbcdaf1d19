"""OpenTelemetry tracing, installed only when OTEL_EXPORTER_OTLP_ENDPOINT is set (the optional
extra ``vmware-pilot[otel]``); nothing imports this module otherwise.

Spans follow the OpenTelemetry semantic conventions for MCP: a server span per MCP request
(``mcp.method.name``, ``gen_ai.tool.name`` and ``gen_ai.operation.name`` for a tool call,
``jsonrpc.request.id``, ``mcp.session.id`` when known), a client span per dispatched step (the
same names, plus ``vmware_pilot.workflow_id``, ``vmware_pilot.step`` and ``vmware_pilot.skill``),
and the step's trace context sent to the skill in the request's ``_meta.traceparent`` so the
trace crosses into the skill. The exporter is OTLP over HTTP, configured by OpenTelemetry's own
variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, …).
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from vmware_pilot import __version__, telemetry
from vmware_pilot.errors import StartupRefused

__all__ = ["OtelTracer", "install"]


class OtelTracer:
    """``telemetry.Tracer`` over an OpenTelemetry tracer provider."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self._tracer = provider.get_tracer("vmware_pilot", __version__)
        self._propagator = TraceContextTextMapPropagator()
        self._kinds = {"server": SpanKind.SERVER, "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}

    @contextlib.contextmanager
    def span(
        self, name: str, kind: telemetry.SpanKind, attributes: Mapping[str, Any], parent: str
    ) -> Iterator[Any]:
        from opentelemetry.trace import Status, StatusCode

        context = self._propagator.extract({"traceparent": parent}) if parent else None
        values = {k: v for k, v in attributes.items() if v is not None and v != ""}
        with self._tracer.start_as_current_span(
            name, context=context, kind=self._kinds[kind], attributes=values, record_exception=False
        ) as current:
            try:
                yield current
            except BaseException as exc:
                current.set_attribute("error.type", type(exc).__name__)
                current.set_status(Status(StatusCode.ERROR))
                raise

    def traceparent(self) -> str:
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier.get("traceparent", "")


def install(exporter: Any = None) -> OtelTracer:
    """Trace to ``exporter`` (default: OTLP over HTTP, from OpenTelemetry's variables) from now on;
    spans are flushed at exit. Raises ``StartupRefused`` when the extra is not installed."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise StartupRefused(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed",
            hint="pip install 'vmware-pilot[otel]', or unset OTEL_EXPORTER_OTLP_ENDPOINT.",
        ) from None
    resource = Resource.create({"service.name": "vmware-pilot", "service.version": __version__})
    provider = TracerProvider(resource=resource)
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        atexit.register(provider.shutdown)
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OtelTracer(provider)
    telemetry.trace_with(tracer)
    return tracer
