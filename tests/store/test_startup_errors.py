"""A database that cannot be used at start-up is one clear error, with advice for its backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.support.cli import Runner, entry_point
from tests.support.pg_server import PgServer, _free_port

CLI = Path(sys.executable).with_name("vmware-pilot")
SQLITE_ADVICE = ("database file", "locked")


def _cli(url: str, *args: str, run: Runner = entry_point) -> subprocess.CompletedProcess[str]:
    return run("vmware-pilot", *args, env={"VMWARE_PILOT_DATABASE_URL": url})


def _assert_one_clear_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: "), done.stderr
    assert "\nhint: " in done.stderr
    for words in expected:
        assert words in done.stderr, done.stderr
    assert not any(advice in done.stderr for advice in SQLITE_ADVICE), done.stderr
    assert len(done.stderr) < 2000


@pytest.mark.slow  # an entry-point process waiting out a refused connection
@pytest.mark.parametrize("command", [["audit", "verify"], ["workflows"]])
def test_an_unreachable_postgresql_server_is_a_clear_retryable_error(command: list[str]) -> None:
    url = f"postgresql+psycopg://pilot@127.0.0.1:{_free_port()}/pilot"
    done = _cli(url, *command)
    _assert_one_clear_error(done, "unavailable", "PostgreSQL server runs and is reachable", "retry")


def test_a_missing_postgresql_database_is_named(pg_server: PgServer, run_pilot: Runner) -> None:
    done = _cli(pg_server.url("no_such_database"), "audit", "verify", run=run_pilot)
    _assert_one_clear_error(done, "no_such_database", "VMWARE_PILOT_DATABASE_URL")


def test_a_user_who_may_not_create_tables_is_told_what_to_grant(
    pg_server: PgServer, run_pilot: Runner
) -> None:
    name = pg_server.new_database()
    try:
        with pg_server.admin() as conn:
            conn.execute(text("DROP ROLE IF EXISTS pilot_reader"))
            conn.execute(text("CREATE ROLE pilot_reader LOGIN"))
        url = pg_server.url(name).replace("pilot_test@", "pilot_reader@")
        done = _cli(url, "audit", "verify", run=run_pilot)
        _assert_one_clear_error(done, "permission denied", "GRANT CREATE ON SCHEMA public")
    finally:
        pg_server.drop_database(name)
        with pg_server.admin() as conn:
            conn.execute(text("DROP ROLE IF EXISTS pilot_reader"))


def test_a_url_without_a_usable_driver_is_refused_with_the_expected_form(run_pilot: Runner) -> None:
    done = _cli("postgresql+nosuchdriver://pilot@127.0.0.1/pilot", "audit", "verify", run=run_pilot)
    _assert_one_clear_error(done, "VMWARE_PILOT_DATABASE_URL cannot be used", "postgresql+psycopg://")
