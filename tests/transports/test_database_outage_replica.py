"""A real `vmware-pilot mcp --transport http` replica on a PostgreSQL server of the test's own, which
the test stops and starts (issue 31): while it is down a valid token gets 503 with ``Retry-After``
(not 401), so does a signed-in console page (not a sign-in redirect), the replica logs the outage once and its end once however many calls fail, and it keeps
one connection pool of the documented size."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from tests.support.pg_server import PgServer
from tests.support.server_proc import INIT, PILOT, PilotProcess, clean_env, start_server

pytestmark = pytest.mark.slow

HEADERS = {"Accept": "application/json, text/event-stream"}
_LOGGED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", re.M)


def _token(host: Path, url: str) -> str:
    env = clean_env(host, {"VMWARE_PILOT_DATABASE_URL": url})
    done = subprocess.run(
        [str(PILOT), "token", "create", "alice"],
        env=env,
        check=False,
        cwd=host,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _post(server: PilotProcess, secret: str | None) -> httpx.Response:
    auth = {"Authorization": f"Bearer {secret}"} if secret else {}
    return httpx.post(server.url, json=INIT, headers={**HEADERS, **auth}, timeout=60)


def _logged(server: PilotProcess, since: int) -> list[str]:
    """The log records (one per line that starts with a time) written after ``since`` characters."""
    return [line for line in server.stderr()[since:].splitlines() if _LOGGED.match(line)]


def test_a_valid_token_gets_503_while_postgresql_is_down_and_the_outage_is_logged_once(
    own_pg: PgServer, tmp_path: Path
) -> None:
    url = own_pg.url(own_pg.new_database())
    secret = _token(tmp_path, url)
    env = {
        "VMWARE_PILOT_DATABASE_URL": url,
        # Every loop that touches the database while it is away: the outbox sender and the sweeper.
        "VMWARE_PILOT_NOTIFY_URL": "http://127.0.0.1:9/hook",
        "VMWARE_PILOT_DISPATCH": "stdio",
        "VMWARE_PILOT_SWEEP_SECONDS": "0.2",
    }
    with (
        start_server(tmp_path, ["--transport", "http"], env=env) as server,
        httpx.Client(base_url=server.base, follow_redirects=False) as console,
    ):
        assert _post(server, secret).status_code == 200
        form = console.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf
        assert (
            console.post("/console/login", data={"csrf": csrf.group(1), "token": secret}).status_code == 303
        )
        assert console.get("/console/workflows").status_code == 200
        before = len(server.stderr())
        own_pg.halt()
        try:
            asked = 0
            for _ in range(8):
                answer = _post(server, secret)
                asked += 1
                assert answer.status_code == 503, answer.text
                assert answer.headers["retry-after"] == "5"
                assert answer.json()["retryable"] is True
                assert _post(server, None).status_code == 401  # no bearer: nothing to check
                page = console.get("/console/workflows")  # a signed-in person: not sent to sign in again
                assert (page.status_code, page.headers.get("retry-after")) == (503, "5"), page.text[:500]
                time.sleep(0.25)  # let the sweeper and the sender fail too (nothing here is timed)
            during = _logged(server, before)
        finally:
            own_pg.resume()
        assert _post(server, secret).status_code == 200, server.stderr()[before:]
        assert console.get("/console/workflows").status_code == 200, "the session held"
        after = _logged(server, before)
    assert len(during) == 1 and "The workflow database is unavailable" in during[0], during
    assert len(after) == 2 and "answers again" in after[1], after
    failed = re.search(r"\((\d+) call\(s\) failed meanwhile\)", after[1])
    assert failed is not None and int(failed.group(1)) > asked, "the loops failed too, and said nothing"


def _connections(own_pg: PgServer, database: str) -> int:
    with own_pg.admin() as conn:
        count = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = :db AND application_name = 'vmware-pilot'"
            ),
            {"db": database},
        ).scalar_one()
    return int(count)


def test_a_network_replica_keeps_one_pool_of_the_documented_size(own_pg: PgServer, tmp_path: Path) -> None:
    database = own_pg.new_database()
    url = own_pg.url(database)
    secret = _token(tmp_path, url)
    env = {"VMWARE_PILOT_DATABASE_URL": url, "VMWARE_PILOT_DATABASE_POOL_SIZE": "1"}
    with start_server(tmp_path, ["--transport", "http"], env=env) as server:
        for _ in range(3):  # the token rows, then the app's own reads
            assert _post(server, secret).status_code == 200
        session = _post(server, secret).headers["mcp-session-id"]
        listed = httpx.post(
            server.url,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "list_workflows", "arguments": {}},
            },
            headers={**HEADERS, "Authorization": f"Bearer {secret}", "mcp-session-id": session},
            timeout=60,
        )
        assert listed.status_code == 200, listed.text
        # Idle now: one pool of size 1 keeps one connection (an overflow one closes when returned;
        # a backend that closed may show in pg_stat_activity for a moment, hence the wait).
        deadline = time.monotonic() + 30
        while _connections(own_pg, database) > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _connections(own_pg, database) == 1
