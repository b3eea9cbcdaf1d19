"""/metrics: Prometheus text, names under pilot_, behind a role on the main port or without a
token on --metrics-port; gauges read from the database, histograms that move with what happens.

In-process for the role rules and the series (MCP calls through a real in-memory client session);
a real server scraped by a real Prometheus (Debian's package) for the gate-wait histogram.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.mcp_client import INCIDENT, connect
from tests.support.server_proc import PILOT, PilotProcess, clean_env, start_server
from vmware_pilot import telemetry
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import RejectRequest
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

ROLES = "roles:\n  metrics:\n    approve: none\n    tools: read\n  ops:\n    approve: any\n    tools: '*'\n"


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of series ``name{labels}`` in an exposition, or None when absent."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return None


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


def _secrets(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    roles = home / "roles.yaml"
    roles.write_text(ROLES)
    roles.chmod(0o600)
    tokens = TokenStore(home / "tokens.json")
    return {
        name: tokens.create(name, name if name != "alice" else "admin")
        for name in ("alice", "reader", "metrics", "ops")
    }


async def test_metrics_need_the_admin_or_metrics_role_and_read_the_database(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    secrets = _secrets(pilot_home)
    roles = RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    asgi = build_http_app(pilot_app, HttpOptions("http"), 8080, TokenStore(pilot_home / "tokens.json"), roles)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1:8080"
    ) as http:

        async def scrape(who: str | None) -> httpx.Response:
            headers = {"authorization": f"Bearer {secrets[who]}"} if who else {}
            return await http.get("/metrics", headers=headers)

        assert (await scrape(None)).status_code == 401
        assert (await http.get("/metrics", headers={"authorization": "Bearer nope"})).status_code == 401
        assert (await scrape("reader")).status_code == 403
        assert (await scrape("ops")).status_code == 403
        before = await scrape("metrics")
        assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
        assert _sample(before.text, "pilot_database_up") == 1
        assert _sample(before.text, "pilot_gates_waiting") == 0
        assert _sample(before.text, "pilot_workflows", state="pending") == 0

        async with connect(pilot_app, Actor("tester")) as client:
            workflow_id = await client.incident()
            await client.ok("run_workflow", workflow_id=workflow_id)
            second = await client.incident()
            refused = await client.refused("reject_workflow", workflow_id=second, reason="")
            assert refused["error"]
            after_gate = (await scrape("alice")).text
            assert _sample(after_gate, "pilot_gates_waiting") == 1
            assert _sample(after_gate, "pilot_workflows", state="awaiting_approval") == 1
            assert _sample(after_gate, "pilot_workflows", state="pending") == 1
            assert _sample(after_gate, "pilot_gate_wait_seconds_count", decision="approved") in (None, 0)
            await client.ok("approve", workflow_id=workflow_id, approver="pat", acknowledge_not_executed=True)
        text = (await scrape("alice")).text
    assert _sample(text, "pilot_gate_wait_seconds_count", decision="approved") == 1
    assert _sample(text, "pilot_gate_decisions_total", decision="approved") == 1
    assert _sample(text, "pilot_gates_waiting") == 0
    assert _sample(text, "pilot_refusals_total", kind="ArgumentError") == 1
    assert (_sample(text, "pilot_mcp_request_duration_seconds_count", method="tools/call") or 0) >= 4
    for name in (
        "pilot_outbox_pending",
        "pilot_outbox_oldest_age_seconds",
        "pilot_lease_takeovers_total",
        "pilot_drift_stops_total",
    ):
        assert name in text, name


async def test_a_rejection_moves_the_gate_wait_histogram_under_its_own_label(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    from vmware_pilot.transports.metrics import Metrics

    metrics = Metrics(pilot_app)
    try:
        async with connect(pilot_app, Actor("tester")) as client:
            workflow_id = await client.incident()
            await client.ok("run_workflow", workflow_id=workflow_id)
            pilot_app.service.reject(RejectRequest(Actor("pat"), workflow_id, "wrong host")).payload()
        text = (await metrics.text()).decode()
    finally:
        metrics.close()
    assert _sample(text, "pilot_gate_wait_seconds_count", decision="rejected") == 1
    assert _sample(text, "pilot_gate_decisions_total", decision="rejected") == 1
    assert _sample(text, "pilot_workflows", state="cancelled") == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics_port(server: PilotProcess) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"vmware-pilot metrics: http://127\.0\.0\.1:(\d+)/metrics", server.stderr())
        if match:
            return int(match.group(1))
        time.sleep(0.1)
    raise AssertionError(server.stderr())


def _query(prom: str, expr: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _wait_for(prom: str, expr: str, want: float, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    seen: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            seen = _query(prom, expr)
        except httpx.ConnectError:  # Prometheus still starting
            seen = []
        if seen and float(seen[0]["value"][1]) == want:
            return
        time.sleep(0.5)
    raise AssertionError(f"{expr} never became {want}: {seen}")


@pytest.mark.slow
async def test_a_real_prometheus_scrapes_the_gate_wait_histogram_moving_when_a_gate_is_approved(
    tmp_path: Path,
) -> None:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is missing: scripts/prometheus-setup.sh installs it"
    home = tmp_path / "pilot"
    home.mkdir()
    made = subprocess.run(
        [str(PILOT), "token", "create", "alice"], env=clean_env(home), cwd=home,
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    secret = made.stdout.strip()
    with start_server(home, ["--transport", "http", "--metrics-port", "0"]) as server:
        port = _metrics_port(server)
        assert httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=10).status_code == 404
        prom_port = _free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pilot\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
        prom_log = (tmp_path / "prometheus.log").open("wb")
        prometheus = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=prom_log, stderr=subprocess.STDOUT, cwd=tmp_path,
        )  # fmt: skip
        prom = f"http://127.0.0.1:{prom_port}"
        try:
            _wait_for(prom, 'up{job="pilot"}', 1)
            _wait_for(prom, "pilot_database_up", 1)
            async with connect_http(server.url, secret, verify=False) as client:
                created = await client.call(
                    "create_workflow_from_template",
                    {"workflow_type": "incident_response", "params": INCIDENT},
                )
                workflow_id = str(created.payload["workflow_id"])
                ran = await client.call("run_workflow", {"workflow_id": workflow_id})
                assert ran.payload["state"] == "awaiting_approval", ran.payload
                _wait_for(prom, "pilot_gates_waiting", 1)
                assert not _query(prom, 'pilot_gate_wait_seconds_count{decision="approved"}')
                approved = await client.call(
                    "approve", {"workflow_id": workflow_id, "acknowledge_not_executed": True}
                )
                assert not approved.is_error, approved.payload
            _wait_for(prom, 'pilot_gate_wait_seconds_count{decision="approved"}', 1)
            _wait_for(prom, "pilot_gates_waiting", 0)
            _wait_for(prom, 'sum(pilot_gate_wait_seconds_bucket{decision="approved",le="+Inf"})', 1)
        finally:
            prometheus.terminate()
            try:
                prometheus.wait(timeout=20)
            except subprocess.TimeoutExpired:
                prometheus.kill()
                prometheus.wait(timeout=10)
            prom_log.close()
    # a client disconnecting from its SSE stream is no error (the SDK logs a traceback for it)
    assert "Traceback" not in server.stderr(), server.stderr()


async def test_the_grafana_dashboard_queries_only_series_the_server_exports(pilot_app: PilotApp) -> None:
    import json

    from vmware_pilot.transports.metrics import Metrics

    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json").read_text()
    )
    metrics = Metrics(pilot_app)
    try:
        for name, (kind, labels) in telemetry.NAMES.items():
            values = dict.fromkeys(labels, "x")
            if kind == "histogram":
                metrics.observe(name, 1.0, values)
            else:
                metrics.count(name, values)
        exported = {
            line.split("{")[0].split(" ")[0]
            for line in (await metrics.text()).decode().splitlines()
            if line and not line.startswith("#")
        }
    finally:
        metrics.close()
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bpilot_\w+", target["expr"])
    }
    assert used, "the dashboard queries nothing"
    assert used <= exported, sorted(used - exported)
    titles = " ".join(p["title"] for p in dashboard["panels"])
    assert "Approval latency" in titles and "failures" in titles
