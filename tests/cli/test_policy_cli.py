"""`vmware-pilot policy check | explain | import | export` through the entry point (CliRunner),
and the policy as a row of the database on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support import REPO
from tests.support.backends import Database
from vmware_pilot.app import build_app
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest
from vmware_pilot.errors import PolicyRefused
from vmware_pilot.policy.load import read_policy_file

runner = CliRunner()
EXAMPLE = REPO / "docs" / "policies.example.yaml"
BROKEN = """\
deny:
  - match: {tool: aiops.delete_vm}
approvals:
  - match: {risk: dangerous}
    quorum: 0
windows:
  - name: nights
    weekly: [{days: [mon], from: "22:00", to: "22:00"}]
"""
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "go?"}}
DELETE = {
    "action": "delete",
    "skill": "aiops",
    "tool": "delete_vm",
    "params": {"vm_name": "prod-web", "confirm": True},
}
OFF = {"action": "off", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "lab-7"}}


def test_check_accepts_the_example_file() -> None:
    done = runner.invoke(cli, ["policy", "check", str(EXAMPLE), "--json"])
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert answer["ok"] is True
    assert answer["rules"] == {"deny": 1, "approvals": 1, "windows": 2}
    assert answer["digest"] == read_policy_file(EXAMPLE).digest


def test_check_lists_every_problem_by_line_and_exits_1(tmp_path: Path) -> None:
    file = tmp_path / "policies.yaml"
    file.write_text(BROKEN, encoding="utf-8")
    done = runner.invoke(cli, ["policy", "check", str(file)])
    assert done.exit_code == 1
    for line, where in [
        (2, "deny[0].reason"),
        (4, "approvals[0].match.risk"),
        (5, "approvals[0].quorum"),
        (8, "windows[0].weekly[0].to"),
    ]:
        assert f"{file}:line {line}: {where}:" in done.stderr, done.stderr
    as_json = runner.invoke(cli, ["policy", "check", str(file), "--json"])
    assert as_json.exit_code == 1
    problems = json.loads(as_json.stdout)["problems"]
    assert [p["line"] for p in problems] == [2, 4, 5, 8]


def test_check_refuses_what_is_not_a_file(tmp_path: Path) -> None:
    done = runner.invoke(cli, ["policy", "check", str(tmp_path / "missing.yaml")])
    assert done.exit_code == 2


def test_a_broken_policy_file_stops_every_command_naming_the_line(settings: Settings) -> None:
    settings.resolved_policies_path.write_text(BROKEN, encoding="utf-8")
    done = runner.invoke(cli, ["workflows"])
    assert done.exit_code == 2
    assert "line 2: deny[0].reason" in done.stderr


def test_a_named_policy_file_that_is_missing_stops_every_command(settings: Settings, tmp_path: Path) -> None:
    missing = tmp_path / "polcies.yaml"  # a typo must not run Pilot without its policy
    done = runner.invoke(cli, ["workflows"], env={"VMWARE_PILOT_POLICIES": str(missing)})
    assert done.exit_code == 2
    assert f"VMWARE_PILOT_POLICIES names {missing}, which is no file" in done.stderr
    assert "hint:" in done.stderr


def test_explain_says_which_rules_apply_and_why(settings: Settings) -> None:
    settings.resolved_policies_path.write_text(EXAMPLE.read_text(), encoding="utf-8")
    app = build_app(settings)
    try:
        made = app.service.create_workflow(CreateRequest(Actor("tester"), "off", "d", [GATE, OFF])).payload()
    finally:
        app.close()
    done = runner.invoke(cli, ["policy", "explain", made["workflow_id"], "--json"])
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert answer["denied"] == []
    assert (
        answer["approvals"][0]["rule"] is None
    )  # power_off_vm is a write, the rule is for destructive prod-*
    [window] = answer["windows"]
    assert window["window"] == "weekend-maintenance" and window["blackout"] is False
    assert window["step_index"] == 1 and "open_now" in window
    text = runner.invoke(cli, ["policy", "explain", made["workflow_id"]])
    assert text.exit_code == 0 and "weekend-maintenance" in text.stdout


@pytest.fixture
def shared(database: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The database URL set explicitly, on SQLite too (a file others may share)."""
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    return database


def test_import_and_export_move_the_policy_through_the_database(
    shared: Database, pilot_home: Path, tmp_path: Path
) -> None:
    from sqlalchemy import text

    # the home's file is not read while the database holds the policy
    pilot_home.mkdir(parents=True, exist_ok=True)
    (pilot_home / "policies.yaml").write_text(BROKEN, encoding="utf-8")
    empty = runner.invoke(cli, ["policy", "export"])
    assert empty.exit_code == 0 and empty.stdout == ""
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN, encoding="utf-8")
    refused = runner.invoke(cli, ["policy", "import", str(broken)])
    assert refused.exit_code == 1 and "line 2" in refused.stderr
    done = runner.invoke(cli, ["policy", "import", str(EXAMPLE), "--json"])
    assert done.exit_code == 0, done.output
    digest = read_policy_file(EXAMPLE).digest
    assert json.loads(done.stdout)["digest"] == digest
    with shared.raw() as conn:
        row = conn.execute(text("SELECT body, digest FROM policies")).one()
    assert row.body == EXAMPLE.read_text() and row.digest == digest
    out = tmp_path / "out.yaml"
    exported = runner.invoke(cli, ["policy", "export", str(out)])
    assert exported.exit_code == 0, exported.output
    assert out.read_text() == EXAMPLE.read_text()
    again = runner.invoke(cli, ["policy", "export", str(out)])
    assert again.exit_code == 2  # never overwrites
    # what every replica's app enforces
    app = build_app(Settings())
    try:
        assert app.policies is not None and app.policies.current().digest == digest
        with pytest.raises(PolicyRefused) as caught:
            app.service.create_workflow(CreateRequest(Actor("tester"), "rm", "d", [GATE, DELETE])).payload()
        assert caught.value.fields["rule"] == "deny[0]"
    finally:
        app.close()


def test_import_needs_a_database_url(tmp_path: Path) -> None:
    done = runner.invoke(cli, ["policy", "import", str(EXAMPLE)])
    assert done.exit_code == 2
    assert "VMWARE_PILOT_DATABASE_URL" in done.stderr


@pytest.mark.slow  # a server process
def test_the_stdio_server_does_not_start_with_a_policy_it_cannot_use(settings: Settings) -> None:
    settings.resolved_policies_path.write_text(BROKEN, encoding="utf-8")
    pilot = Path(sys.executable).with_name("vmware-pilot")
    done = subprocess.run(
        [str(pilot), "mcp"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # stdout is the protocol's
    assert "line 2: deny[0].reason" in done.stderr and "line 5: approvals[0].quorum" in done.stderr
    assert "Traceback" not in done.stderr
