"""The token store's database away (issue 31): a request carrying a bearer gets 503 with
``Retry-After`` (the token may well be valid), never ``401 invalid_token``; one without a bearer
still gets 401; nothing is logged per request. In-process, against a PostgreSQL URL
nothing listens on; tests/transports/test_database_outage_replica.py does it with a real server
stopped and started again."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server_proc import INIT
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.store import Database, TokenRows
from vmware_pilot.store.connection import OutageLog, make_engine
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import DbTokenStore

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    return f"postgresql+psycopg://pilot@127.0.0.1:{port}/pilot"  # nothing listens there now


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


@pytest.fixture
async def client(pilot_app: PilotApp, pilot_home: Path) -> AsyncIterator[httpx.AsyncClient]:
    database = Database(make_engine(_dead_url(), Settings(home=pilot_home, database_connect_timeout=2)))
    asgi = build_http_app(
        pilot_app,
        HttpOptions("http"),
        8080,
        DbTokenStore(TokenRows(database)),
        RoleBook(pilot_home / "r.yaml", TOOL_NAMES),
    )
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        yield c
    database.close()


async def test_a_bearer_gets_503_with_retry_after_while_the_token_store_cannot_be_read(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for _ in range(5):
        answer = await client.post("/mcp", json=INIT, headers={**HEADERS, "Authorization": "Bearer vpt_x"})
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "5"
        body = answer.json()
        assert (body["error"], body["retryable"]) == ("temporarily_unavailable", True)
        assert "127.0.0.1" not in answer.text, "where the database is stays in the server's log"
    anonymous = await client.post("/mcp", json=INIT, headers=HEADERS)
    assert anonymous.status_code == 401
    # Not a line per request (a store that never reached its database leaves saying so to whoever
    # opened it: start-up; the slow test stops a database that was up and sees one line).
    assert [r.getMessage() for r in caplog.records] == []


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    log = OutageLog(logging.getLogger("vmware_pilot.test"), "postgresql database d at h:1")
    log.failed("never reached yet: whoever opened it says so")
    log.recovered()
    for _ in range(100):
        log.failed("The workflow database is unavailable (d): refused")
    log.recovered()
    log.recovered()
    log.failed("The workflow database is unavailable (d): refused again")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("The workflow database is unavailable (d): refused;")
    assert "answers again" in lines[1] and "(100 call(s) failed meanwhile)" in lines[1]
    assert "refused again" in lines[2]
