"""`vmware-pilot token …` with VMWARE_PILOT_DATABASE_URL set: the tokens are rows of that database
(hash only), shared by every replica, and no token file is written in the pilot home."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.backends import Database
from vmware_pilot.cli.main import app

runner = CliRunner()


@pytest.fixture
def shared(database: Database, pilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The database URL set explicitly, on SQLite too (a file others may share)."""
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    return database


def _rows(database: Database) -> list[tuple[str, str, str]]:
    from sqlalchemy import text

    with database.raw() as conn:
        found = conn.execute(text("SELECT name, role, hash FROM api_tokens ORDER BY name"))
        return [(r.name, r.role, r.hash) for r in found]


def test_tokens_are_rows_of_the_database_holding_only_the_hash(shared: Database, pilot_home: Path) -> None:
    made = runner.invoke(app, ["token", "create", "alice", "--role", "reader"])
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip()
    digest = "sha256:" + hashlib.sha256(secret.encode()).hexdigest()
    assert _rows(shared) == [("alice", "reader", digest)]
    assert secret.encode() not in shared.stored_bytes()
    assert not (pilot_home / "tokens.json").exists()

    assert runner.invoke(app, ["token", "create", "bob"]).exit_code == 0
    listed = runner.invoke(app, ["token", "list"])
    assert [line.split("\t")[:2] for line in listed.stdout.splitlines()] == [
        ["alice", "reader"],
        ["bob", "admin"],
    ]
    assert secret not in listed.output


def test_duplicate_set_role_and_revoke_work_on_the_rows(shared: Database) -> None:
    assert runner.invoke(app, ["token", "create", "alice"]).exit_code == 0
    dup = runner.invoke(app, ["token", "create", "alice"])
    assert dup.exit_code == 2 and "already exists" in dup.stderr and "hint:" in dup.stderr
    assert runner.invoke(app, ["token", "set-role", "alice", "reader"]).exit_code == 0
    assert [(n, r) for n, r, _ in _rows(shared)] == [("alice", "reader")]
    assert runner.invoke(app, ["token", "revoke", "alice"]).exit_code == 0
    assert _rows(shared) == []
    for args in (["revoke", "alice"], ["set-role", "alice", "admin"]):
        missing = runner.invoke(app, ["token", *args])
        assert missing.exit_code == 2 and "no token named 'alice'" in missing.stderr


def test_an_unreachable_database_is_a_usage_refusal(
    pilot_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", "postgresql+psycopg://pilot@127.0.0.1:1/none")
    result = runner.invoke(app, ["token", "create", "alice"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
