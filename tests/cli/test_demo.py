"""`vmware-pilot demo` through its real entry point: it starts the MCP server and walks a template."""

from __future__ import annotations

import http.server
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from sqlalchemy import text

from tests.support.backends import Database

BIN = Path(sys.executable).parent / "vmware-pilot"


def _demo(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "140", **(env_extra or {})}
    return subprocess.run(
        [str(BIN), "demo", *args], check=False, capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.slow  # the demo process and the server it starts
def test_demo_walks_the_flow_and_prints_each_step(pilot_home: Path) -> None:
    result = _demo()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for fragment in (
        "vmware-pilot",
        "create_workflow_from_template(incident_response)",
        "review_workflow → verdict approved",
        "run_workflow → outcome awaiting_approval",
        "monitor.get_alarms",
        "approve without acknowledgement → refused",
        "outcome dispatch_required",
        "aiops.acknowledge_vcenter_alarm",
        "get_workflow_status → state pending",
        "reported_done",
        "rollback (preview",
        "not_reversible_outside_pilot",
    ):
        assert fragment in out, fragment
    assert "{\n" not in out  # readable panels, not raw JSON
    assert not pilot_home.exists()  # a throw-away home: the user's pilot home is never touched


@pytest.mark.slow
def test_demo_json_prints_raw_results_in_order(tmp_path: Path) -> None:
    home = tmp_path / "demo-home"
    result = _demo("--json", "--home", str(home))
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert [r["tool"] for r in record] == [
        "create_workflow_from_template",
        "review_workflow",
        "run_workflow",
        "approve",
        "approve",
        "get_workflow_status",
        "rollback",
    ]
    assert [r["isError"] for r in record] == [False, False, False, True, False, False, False]
    assert record[2]["result"]["outcome"] == "awaiting_approval"
    assert record[3]["result"]["not_executed_before_gate"]
    assert record[-1]["result"]["action"] == "preview"
    assert (home / "pilot.db").exists()  # --home keeps the demo workflow


class _Receiver(http.server.BaseHTTPRequestHandler):
    """A webhook receiver that records every request it gets."""

    received: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.received.append(self.path)
        self.send_response(204)
        self.end_headers()

    do_GET = do_POST  # a redirected webhook would arrive as a GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str]]]:
    received: ClassVar[list[str]] = []
    handler = type("Handler", (_Receiver,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _workflow_rows(database: Database) -> int:
    with database.raw() as conn:
        return int(conn.execute(text("SELECT count(*) FROM workflows")).scalar_one())


SKILLS = ("monitor", "aiops", "vm", "storage", "network", "harden", "aria", "nsx")


@pytest.mark.slow  # the demo process and the server it starts
def test_the_demo_leaves_the_configured_database_webhook_and_skills_alone(
    database: Database, pilot_home: Path, tmp_path: Path, receiver: tuple[str, list[str]]
) -> None:
    url, received = receiver
    started = tmp_path / "started"
    started.mkdir()
    record = "import pathlib, sys; pathlib.Path(sys.argv[1]).touch()"
    commands = {skill: shlex.join([sys.executable, "-c", record, str(started / skill)]) for skill in SKILLS}
    db_url = database.settings_url or f"sqlite:///{pilot_home / 'pilot.db'}"
    env = {
        "VMWARE_PILOT_DATABASE_URL": db_url,
        "VMWARE_PILOT_NOTIFY_URL": url,
        "VMWARE_PILOT_NOTIFY_SECRET": "s3cret-of-the-operator",
        "VMWARE_PILOT_DISPATCH": "stdio",
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps(commands),
        "VMWARE_PILOT_APPROVALS": "human",  # the demo's own approve would be refused
    }
    before = _workflow_rows(database)
    demo_home = tmp_path / "demo-home"
    result = _demo("--home", str(demo_home), env_extra=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The demo stands alone: it ignores" in result.stdout
    said = " ".join(result.stdout.split())  # as wrapped to the terminal
    for name in env:
        assert name in said, name
    assert _workflow_rows(database) == before  # the configured database: untouched
    assert (demo_home / "pilot.db").exists()  # the demo wrote its own
    assert received == []  # no webhook
    assert sorted(p.name for p in started.iterdir()) == []  # no skill started
    assert "s3cret" not in result.stdout + result.stderr


def test_the_demo_server_gets_only_the_settings_the_demo_owns(monkeypatch: pytest.MonkeyPatch) -> None:
    from vmware_pilot.cli.demo import _child_env, _cleared

    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", "postgresql://pilot@db.example.com/pilot")
    monkeypatch.setenv("VMWARE_PILOT_DISPATCH", "stdio")
    monkeypatch.setenv("VMWARE_PILOT_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("VMWARE_PILOT_NO_SUCH_SETTING", "1")  # unknown names are not passed on either
    env = _child_env(Path("/tmp/demo-home"))
    assert {k: v for k, v in env.items() if k.startswith("VMWARE_PILOT_")} == {
        "VMWARE_PILOT_HOME": "/tmp/demo-home",
        "VMWARE_PILOT_LOG_LEVEL": "DEBUG",
    }
    assert env["PATH"] == os.environ["PATH"]
    assert _cleared() == [
        "VMWARE_PILOT_DATABASE_URL",
        "VMWARE_PILOT_DISPATCH",
        "VMWARE_PILOT_NO_SUCH_SETTING",
    ]
