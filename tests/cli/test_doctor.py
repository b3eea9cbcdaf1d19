"""`vmware-pilot doctor` through the entry point: settings, database and skill checks, table and
--json, exit 0 when all is well and 1 naming what is not. (The lab run is tests/lab/test_doctor.py.)"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import FAKE_SKILL
from tests.support.backends import Database
from tests.support.cli import Runner, entry_point
from tests.support.oidc_provider import Person, Provider, new_key

PILOT = Path(sys.executable).with_name("vmware-pilot")


def doctor(*args: str, env: dict[str, str] | None = None, run: Runner = entry_point) -> tuple[int, str, str]:
    done = run("vmware-pilot", "doctor", *args, env={"COLUMNS": "200", **(env or {})})
    return done.returncode, done.stdout, done.stderr


def rows(stdout: str) -> dict[str, dict[str, Any]]:
    return {row["check"]: row for row in json.loads(stdout)["checks"]}


def test_a_fresh_home_is_well_and_nothing_is_created(pilot_home: Path, run_pilot: Runner) -> None:
    code, out, err = doctor(run=run_pilot)
    assert code == 0, out + err
    assert "All is well." in out and "database" in out
    assert not pilot_home.exists()  # doctor looks, it creates nothing


@pytest.mark.slow  # starts a skill server
def test_a_misspelt_setting_and_a_required_skill_that_will_not_start_are_named(pilot_home: Path) -> None:
    broken = shlex.join([sys.executable, str(FAKE_SKILL), "nostart"])
    env = {
        "VMWARE_PILOT_DISPACH": "stdio",
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"aiops": broken}),
        "VMWARE_PILOT_NOTIFY_SECRET": "s3cret-value",
    }
    code, out, err = doctor("--json", env=env)
    assert code == 1, out + err
    found = rows(out)
    assert json.loads(out)["ok"] is False
    assert found["setting VMWARE_PILOT_DISPACH"] == {
        "check": "setting VMWARE_PILOT_DISPACH",
        "status": "fail",
        "detail": "unknown name; did you mean VMWARE_PILOT_DISPATCH?",
    }
    assert found["skill aiops"]["status"] == "fail"
    assert "fake skill: refusing to start" in found["skill aiops"]["detail"]
    assert "s3cret-value" not in out + err


def test_invalid_settings_fail_with_the_variable_named(pilot_home: Path, run_pilot: Runner) -> None:
    code, out, _ = doctor("--json", env={"VMWARE_PILOT_DISPATCH": "sometimes"}, run=run_pilot)
    assert code == 1
    assert rows(out)["settings"]["status"] == "fail"
    assert "VMWARE_PILOT_DISPATCH" in rows(out)["settings"]["detail"]


@pytest.mark.slow  # entry-point runs on both backends; the cheap checks are above
def test_the_database_reports_its_schema_and_clock(database: Database) -> None:
    env = {"VMWARE_PILOT_DATABASE_URL": database.raw_url} if database.backend == "postgresql" else {}
    code, out, err = doctor("--json", env=env)
    assert code == 0, out + err
    found = rows(out)
    assert found["database"]["status"] == "ok" and "no migration pending" in found["database"]["detail"]
    assert found["clock"]["status"] == "ok"
    assert "pilot_test" not in out  # nothing of the URL's user


@pytest.mark.slow  # an entry-point run waiting on a connection; the cheap checks are above
def test_an_unreachable_database_fails(pilot_home: Path) -> None:
    url = "postgresql+psycopg://pilot:pw-secret@127.0.0.1:9/none"
    code, out, _ = doctor(
        "--json", env={"VMWARE_PILOT_DATABASE_URL": url, "VMWARE_PILOT_DATABASE_CONNECT_TIMEOUT": "2"}
    )
    assert code == 1
    assert rows(out)["database"]["status"] == "fail"
    assert "pw-secret" not in out


@pytest.mark.slow  # runs the entry point
def test_a_skill_whose_tool_environment_is_gone_fails_even_when_not_required(
    pilot_home: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "vmware-monitor-mcp"
    gone = tmp_path / "tools" / "vmware-monitor" / "bin" / "python"
    program.write_text(f"#!{gone}\nimport sys\n")
    program.chmod(0o755)

    code, out, err = doctor("--json", env={"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"})

    assert code == 1, out + err
    row = rows(out)["skill monitor"]
    assert row["status"] == "fail"
    assert "environment of skill 'monitor' is missing" in row["detail"]
    assert str(gone) in row["detail"] and "uv tool install --reinstall vmware-monitor" in row["detail"]
    assert rows(out)["skill aiops"]["status"] == "info"  # a skill simply not installed stays info


@pytest.mark.slow  # starts an OpenID Provider (Node)
def test_the_oauth_issuer_is_checked_for_what_mcp_clients_need(pilot_home: Path, tmp_path: Path) -> None:
    provider = Provider(
        tmp_path / "oidc", [Person("alice", "alice-secret", "Alice", ("ops",))], [new_key("k1")]
    )
    provider.start()
    try:
        code, out, err = doctor("--json", env={"VMWARE_PILOT_OAUTH_ISSUER": provider.issuer})
    finally:
        provider.stop()
    assert code == 0, out + err
    found = rows(out)
    assert found["oauth"]["status"] == "ok" and "1 signing key(s)" in found["oauth"]["detail"]
    assert found["oauth pkce"] == {"check": "oauth pkce", "status": "ok", "detail": "S256 advertised"}
    # The test provider offers neither client ID metadata documents nor dynamic registration.
    assert found["oauth registration"]["status"] == "info"
    assert "register each MCP client at the issuer in advance" in found["oauth registration"]["detail"]
