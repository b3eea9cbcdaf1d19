"""`vmware-pilot token …` through the typer entry point."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from typer.testing import CliRunner

from vmware_pilot.cli.main import app
from vmware_pilot.transports.tokens import TokenStore

runner = CliRunner()


def _store(pilot_home: Path) -> TokenStore:
    return TokenStore(pilot_home / "tokens.json")


def test_create_prints_only_the_secret_on_stdout_once(pilot_home: Path) -> None:
    result = runner.invoke(app, ["token", "create", "alice", "--role", "reader"])
    assert result.exit_code == 0, result.output
    secret = result.stdout.strip()
    assert "\n" not in secret
    assert "shown only now" in result.stderr and secret not in result.stderr
    entry = _store(pilot_home).verify(secret)
    assert entry is not None and (entry.name, entry.role) == ("alice", "reader")
    file = pilot_home / "tokens.json"
    assert secret not in file.read_text()
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    listed = runner.invoke(app, ["token", "list"])
    assert listed.exit_code == 0 and secret not in listed.output


def test_create_defaults_to_admin_and_list_shows_names_and_roles(pilot_home: Path) -> None:
    assert runner.invoke(app, ["token", "create", "alice"]).exit_code == 0
    assert runner.invoke(app, ["token", "create", "bob", "--role", "reader"]).exit_code == 0
    listed = runner.invoke(app, ["token", "list"])
    rows = [line.split("\t")[:2] for line in listed.stdout.splitlines()]
    assert rows == [["alice", "admin"], ["bob", "reader"]]


def test_create_refuses_an_undefined_role_and_a_duplicate_name(pilot_home: Path) -> None:
    bad = runner.invoke(app, ["token", "create", "alice", "--role", "operator"])
    assert bad.exit_code == 2
    assert "role 'operator' is not defined" in bad.stderr and "roles.yaml" in bad.stderr
    assert not (pilot_home / "tokens.json").exists()
    assert runner.invoke(app, ["token", "create", "alice"]).exit_code == 0
    dup = runner.invoke(app, ["token", "create", "alice"])
    assert dup.exit_code == 2 and "already exists" in dup.stderr and "hint:" in dup.stderr


def test_a_custom_role_from_the_roles_file_can_be_given(pilot_home: Path) -> None:
    pilot_home.mkdir(parents=True, exist_ok=True)
    roles = pilot_home / "roles.yaml"
    roles.write_text("roles:\n  operator:\n    approve: others\n    tools: '*'\n")
    roles.chmod(0o600)
    assert runner.invoke(app, ["token", "create", "carol", "--role", "operator"]).exit_code == 0
    shown = runner.invoke(app, ["token", "roles"])
    assert shown.exit_code == 0
    assert "operator\tapprove: others\tall tools" in shown.stdout
    assert "reader\tapprove: none\treview_workflow, get_workflow_status" in shown.stdout


def test_roles_lists_the_groups_mapped_for_oauth_callers(pilot_home: Path) -> None:
    pilot_home.mkdir(parents=True, exist_ok=True)
    roles = pilot_home / "roles.yaml"
    roles.write_text("groups:\n  vmware-operators: reader\n  admin: ~\n")
    roles.chmod(0o600)
    shown = runner.invoke(app, ["token", "roles"])
    assert shown.exit_code == 0, shown.stderr
    assert "group vmware-operators\t→ reader" in shown.stdout and "group admin\t→ no role" in shown.stdout


def test_roles_exits_1_and_says_why_when_the_roles_file_is_broken(pilot_home: Path) -> None:
    pilot_home.mkdir(parents=True, exist_ok=True)
    roles = pilot_home / "roles.yaml"
    roles.write_text("roles:\n  operator:\n    approve: often\n    tools: '*'\n")
    roles.chmod(0o600)
    shown = runner.invoke(app, ["token", "roles"])
    assert shown.exit_code == 1
    assert "custom roles are off" in shown.stderr and "approve must be one of" in shown.stderr
    assert "admin\tapprove: any" in shown.stdout


def test_set_role_and_revoke_rewrite_the_file(pilot_home: Path) -> None:
    secret = runner.invoke(app, ["token", "create", "alice"]).stdout.strip()
    assert runner.invoke(app, ["token", "set-role", "alice", "reader"]).exit_code == 0
    entry = _store(pilot_home).verify(secret)
    assert entry is not None and entry.role == "reader"
    assert runner.invoke(app, ["token", "revoke", "alice"]).exit_code == 0
    assert _store(pilot_home).verify(secret) is None
    assert json.loads((pilot_home / "tokens.json").read_text())["tokens"] == []


def test_revoke_and_set_role_refuse_an_unknown_token(pilot_home: Path) -> None:
    gone = runner.invoke(app, ["token", "revoke", "ghost"])
    assert gone.exit_code == 2 and "no token named 'ghost'" in gone.stderr and "token list" in gone.stderr
    assert runner.invoke(app, ["token", "set-role", "ghost", "admin"]).exit_code == 2
    assert runner.invoke(app, ["token", "set-role", "ghost", "nosuchrole"]).exit_code == 2


def test_list_refuses_an_unsafe_file_with_the_fix(pilot_home: Path) -> None:
    assert runner.invoke(app, ["token", "create", "alice"]).exit_code == 0
    os.chmod(pilot_home / "tokens.json", 0o640)
    listed = runner.invoke(app, ["token", "list"])
    assert listed.exit_code == 2 and "chmod 600" in listed.stderr


def test_list_without_tokens_says_how_to_create_one() -> None:
    listed = runner.invoke(app, ["token", "list"])
    assert listed.exit_code == 0 and "vmware-pilot token create" in listed.stdout


def test_invalid_settings_are_a_usage_error_not_a_traceback() -> None:
    for args in (["token", "list"], ["token", "create", "alice"], ["token", "roles"]):
        result = runner.invoke(app, args, env={"VMWARE_PILOT_APPROVALS": "bogus"})
        assert result.exit_code == 2, args
        assert "invalid settings" in result.stderr and "VMWARE_PILOT_" in result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit)
