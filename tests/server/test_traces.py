"""Traces (the optional extra `otel`): a server span per MCP request and a client span per
dispatched step with the MCP semantic conventions, the step's trace context passed to the skill
in `_meta.traceparent`; and nothing of OpenTelemetry loaded when OTEL_EXPORTER_OTLP_ENDPOINT is
unset. Spans go to OpenTelemetry's in-memory exporter; the skill is a real MCP server process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.dispatch_options import options
from tests.support.mcp_client import ERAS, READ_STEP, Client, sdk_client
from tests.support.raw import raw_session
from tests.support.task_server import TaskHandle, task_request, tasks_client
from vmware_pilot import telemetry
from vmware_pilot.adapters.otel import install
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import BeforeSend, OutcomeKind, StepOutcome
from vmware_pilot.dispatch.stdio import StdioDispatcher
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step
from vmware_pilot.server import create_server

CLIENT_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    install(exporter)
    try:
        yield exporter
    finally:
        telemetry.trace_with(None)


class Recording:
    """Succeeds every call, noting the traceparent a skill would be sent."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        return []

    async def prepare(self, demand: Mapping[str, int]) -> None:
        return None

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        if before_send is not None:  # as a real dispatcher does once its session is ready
            await before_send()
        self.seen.append(telemetry.traceparent())
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    async def aclose(self) -> None:
        return None


async def test_a_run_is_one_trace_from_the_clients_request_to_each_step(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    dispatcher = Recording()
    app = build_app(settings, dispatcher=dispatcher)
    try:
        async with raw_session(create_server(app, actor=Actor("t"))) as peer:
            created = await peer.request(
                "tools/call",
                {
                    "name": "create_workflow",
                    "arguments": {"name": "r", "description": "d", "steps": [READ_STEP, READ_STEP]},
                },
            )
            workflow_id = created["result"]["structuredContent"]["workflow_id"]
            ran = await peer.request(
                "tools/call",
                {
                    "name": "run_workflow",
                    "arguments": {"workflow_id": workflow_id},
                    "_meta": {"traceparent": CLIENT_PARENT},
                },
            )
            assert ran["result"]["structuredContent"]["state"] == "completed"
    finally:
        await app.aclose()
    finished = spans.get_finished_spans()
    run = next(s for s in finished if s.name == "tools/call run_workflow")
    assert run.kind.name == "SERVER"
    assert run.attributes is not None
    assert run.attributes["mcp.method.name"] == "tools/call"
    assert run.attributes["gen_ai.tool.name"] == "run_workflow"
    assert run.attributes["vmware_pilot.workflow_id"] == workflow_id
    # the client's trace goes on: same trace id, the client's span as parent
    assert f"{run.context.trace_id:032x}" == CLIENT_PARENT.split("-")[1]
    assert run.parent is not None and f"{run.parent.span_id:016x}" == CLIENT_PARENT.split("-")[2]
    steps = [s for s in finished if s.name == "tools/call list_virtual_machines"]
    assert len(steps) == 2
    for index, step in enumerate(sorted(steps, key=lambda s: s.start_time or 0)):
        assert step.kind.name == "CLIENT" and step.attributes is not None
        assert step.attributes["vmware_pilot.step"] == index
        assert step.attributes["vmware_pilot.workflow_id"] == workflow_id
        assert step.attributes["vmware_pilot.skill"] == "aiops"
        assert step.attributes["vmware_pilot.outcome"] == "succeeded"
        assert step.context.trace_id == run.context.trace_id
    # what each skill was sent names its step's span
    sent = {(s.context.trace_id, s.context.span_id) for s in steps}
    got = {(int(tp.split("-")[1], 16), int(tp.split("-")[2], 16)) for tp in dispatcher.seen}
    assert got == sent
    listed = [s for s in finished if s.attributes and s.attributes.get("mcp.method.name") == "tools/call"]
    assert {s.name for s in listed} >= {"tools/call create_workflow", "tools/call run_workflow"}


@pytest.mark.slow  # a process of its own
async def test_the_trace_context_reaches_a_real_skill_in_meta(spans: InMemorySpanExporter) -> None:
    dispatcher = StdioDispatcher(options(), env=dict(os.environ))
    try:
        with telemetry.span("step", "client") as current:
            outcome = await dispatcher.call("aiops", "traced", {})
        untraced = await dispatcher.call("aiops", "traced", {})
    finally:
        await dispatcher.aclose()
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome.message
    context = current.get_span_context()
    version, trace_id, span_id, flags = outcome.payload["traceparent"].split("-")
    assert (version, trace_id, span_id) == ("00", f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert int(flags, 16) & 1  # sampled
    assert untraced.payload["traceparent"] is None  # no span: nothing sent


@pytest.mark.slow  # a process of its own
def test_tracing_is_off_and_no_tracing_sdk_imported_without_an_endpoint(tmp_path: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "from vmware_pilot.cli.stdio import load_settings\n"
        "from vmware_pilot.app import build_app\n"
        "from vmware_pilot.server import create_server\n"
        "from vmware_pilot.domain.actor import Actor\n"
        "from tests.support.mcp_client import connect\n"
        "settings = load_settings(False)\n"
        "app = build_app(settings)\n"
        "async def main():\n"
        "    async with connect(app) as client:\n"
        "        await client.incident()\n"
        "asyncio.run(main())\n"
        "from opentelemetry import trace\n"  # the API: the MCP SDK 2.x imports it itself
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))]\n"
        "loaded += [m for m in sys.modules if m == 'vmware_pilot.adapters.otel']\n"
        "loaded += [type(trace.get_tracer_provider()).__name__]\n"
        "print(sorted(loaded))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["VMWARE_PILOT_HOME"] = str(tmp_path / ".vmware")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False,
        cwd=Path(__file__).resolve().parents[2], timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # No tracing SDK, exporter or Pilot's tracing adapter; the API's tracer provider is still its
    # stand-in, so the SDK's own spans are no-ops.
    assert done.stdout.strip().splitlines()[-1] == "['ProxyTracerProvider']"


@pytest.mark.slow
async def test_a_real_server_exports_its_spans_over_otlp(tmp_path: Path) -> None:
    """`vmware-pilot mcp --transport http` with OTEL_EXPORTER_OTLP_ENDPOINT set sends OTLP/HTTP
    protobuf to a collector (a small HTTP server here) with the MCP request spans."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tests.support.mcp_client import INCIDENT
    from tests.support.server_proc import PILOT, clean_env, start_server
    from vmware_pilot.transports.client import connect_http

    received: list[ExportTraceServiceRequest] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if self.path == "/v1/traces":
                received.append(ExportTraceServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=collector.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        secret = subprocess.run(
            [str(PILOT), "token", "create", "alice"], env=clean_env(tmp_path), cwd=tmp_path,
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout.strip()  # fmt: skip
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        with start_server(tmp_path, ["--transport", "http"], env=env) as server:
            async with connect_http(server.url, secret) as client:
                created = await client.call(
                    "create_workflow_from_template",
                    {"workflow_type": "incident_response", "params": INCIDENT},
                )
                assert not created.is_error
            assert server.stop() == 0, server.stderr()
    finally:
        collector.shutdown()
        collector.server_close()
    spans = [
        (resource.resource, span)
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = {span.name for _, span in spans}
    assert "tools/call create_workflow_from_template" in names, names
    assert "unknown" not in names and "" not in names  # the SDK's inner calls are not requests
    resource = spans[0][0]
    assert {a.key: a.value.string_value for a in resource.attributes}["service.name"] == "vmware-pilot"
    call = next(span for _, span in spans if span.name == "tools/call create_workflow_from_template")
    attributes = {a.key: a.value.string_value for a in call.attributes}
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "create_workflow_from_template"


@pytest.mark.parametrize("era", ERAS)
async def test_each_era_continues_the_clients_traceparent_into_the_run_and_on_to_each_skill(
    settings: Settings, spans: InMemorySpanExporter, era: str
) -> None:
    """The SDK's client of either era sends ``_meta.traceparent`` (2026-07-28: beside the
    protocol version and client info every request carries); Pilot's span of the call is its child
    and each step's span, whose trace context the skill is sent, is in the same trace."""
    dispatcher = Recording()
    app = build_app(settings, dispatcher=dispatcher)
    try:
        async with sdk_client(create_server(app, actor=Actor("t")), era=era) as session:
            client = Client(session)
            workflow_id = await client.custom([READ_STEP, READ_STEP])
            ran = await session.call_tool(
                "run_workflow", {"workflow_id": workflow_id}, meta={"traceparent": CLIENT_PARENT}
            )
            assert ran.structured_content is not None and ran.structured_content["state"] == "completed"
    finally:
        await app.aclose()
    finished = spans.get_finished_spans()
    (run,) = [s for s in finished if s.name == "tools/call run_workflow"]
    assert f"{run.context.trace_id:032x}" == CLIENT_PARENT.split("-")[1]
    assert run.parent is not None and f"{run.parent.span_id:016x}" == CLIENT_PARENT.split("-")[2]
    steps = [s for s in finished if s.name == "tools/call list_virtual_machines"]
    assert len(steps) == 2 and all(s.parent is not None for s in steps)
    assert {s.context.trace_id for s in steps} == {run.context.trace_id}
    sent = {f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-01" for s in steps}
    assert set(dispatcher.seen) == sent
    # a call without a traceparent starts a trace of its own
    (created,) = [s for s in finished if s.name == "tools/call create_workflow"]
    assert created.parent is None and created.context.trace_id != run.context.trace_id


async def test_a_run_carried_as_a_task_stays_in_the_clients_trace(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    """2026-07-28 with the tasks extension: the call is answered with a task handle and the run
    goes on after the request; its steps are still in the trace the client's traceparent began."""
    dispatcher = Recording()
    app = build_app(settings, dispatcher=dispatcher)
    try:
        async with tasks_client(create_server(app, actor=Actor("t"))) as session:
            workflow_id = await Client(session).custom([READ_STEP, READ_STEP])
            handle = await session.session.call_tool(
                "run_workflow", {"workflow_id": workflow_id}, allow_claimed=True,
                meta={"traceparent": CLIENT_PARENT},
            )  # fmt: skip
            assert isinstance(handle, TaskHandle), handle
            with anyio.fail_after(30):
                while (await task_request(session, "tasks/get", handle.task_id))["status"] == "working":
                    await anyio.sleep(0.02)
    finally:
        await app.aclose()
    steps = [s for s in spans.get_finished_spans() if s.name == "tools/call list_virtual_machines"]
    assert len(steps) == 2
    assert {f"{s.context.trace_id:032x}" for s in steps} == {CLIENT_PARENT.split("-")[1]}
    assert set(dispatcher.seen) == {
        f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-01" for s in steps
    }
