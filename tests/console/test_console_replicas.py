"""Console sessions across replicas: two `vmware-pilot mcp --transport http` processes sharing one
database (SQLite file, PostgreSQL) behind an imagined load balancer. A person signed in on one
is signed in on the other; signing out on either signs out on both; the database holds no
session cookie value."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.support.backends import Database
from tests.support.console_team import make_pilot_home
from tests.support.server_proc import PilotProcess, start_server
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store
from vmware_pilot.transports.console.sessions import COOKIE
from vmware_pilot.transports.tokens import DbTokenStore

pytestmark = pytest.mark.slow


@pytest.fixture
def replicas(database: Database, pilot_home: Path) -> Iterator[list[PilotProcess]]:
    folder = pilot_home.parent  # the SQLite file is where ``database`` looks for it
    home, tokens = make_pilot_home(folder, {"alice": "admin"})
    env = {"VMWARE_PILOT_HOME": str(home)}
    if database.settings_url:
        env["VMWARE_PILOT_DATABASE_URL"] = database.settings_url
        # with a database URL the replicas read their tokens from the database
        with open_store(Settings(home=home, database_url=database.settings_url)) as store:
            tokens = {"alice": DbTokenStore(store.tokens).create("alice", "admin")}
    (folder / "alice.token").write_text(tokens["alice"])
    with ExitStack() as stack:
        yield [stack.enter_context(start_server(folder, ["--transport", "http"], env=env)) for _ in range(2)]


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def _sign_in(server: PilotProcess, token: str) -> str:
    with httpx.Client(base_url=server.base) as client:
        form = client.get("/console/login")
        answer = client.post(
            "/console/login", data={"csrf": _csrf(form.text), "token": token}, follow_redirects=False
        )
        assert answer.status_code == 303, answer.text
        return str(answer.cookies[COOKIE])


def _page(server: PilotProcess, cookie: str, path: str = "/console/workflows") -> httpx.Response:
    return httpx.get(server.base + path, cookies={COOKIE: cookie}, follow_redirects=False)


def test_a_session_opened_on_one_replica_holds_on_the_other_and_sign_out_ends_it_on_both(
    replicas: list[PilotProcess], database: Database
) -> None:
    one, two = replicas
    token = (one.log.parent / "alice.token").read_text()
    cookie = _sign_in(one, token)

    seen = _page(two, cookie)
    assert seen.status_code == 200 and "token:alice" in seen.text, seen.text[:500]
    assert _page(one, cookie).status_code == 200
    stored = database.stored_bytes()
    assert b"token:alice" in stored or b'"alice"' in stored, "the sessions are not in this database"
    assert cookie.encode() not in stored, "the cookie value is stored in clear"

    # Sign out on the second replica with the CSRF token its page carries, while the first
    # streams live updates to the same person: the stream ends too.
    with httpx.Client(base_url=one.base, cookies={COOKIE: cookie}, timeout=60) as client:
        with client.stream("GET", "/console/events") as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("event:")) == "event: changed"
            out = httpx.post(
                two.base + "/console/logout",
                data={"csrf": _csrf(seen.text)},
                cookies={COOKIE: cookie},
                follow_redirects=False,
            )
            # Bounded: a stream that outlives the session sends a keep-alive every 15 s, forever.
            after = [
                line for _, line in zip(range(40), lines, strict=False) if line.startswith(("event", ":"))
            ]
            assert "event: signed_out" in after, f"the stream outlived the session: {after}"
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    for server in (one, two):
        gone = _page(server, cookie)
        assert gone.status_code == 303 and gone.headers["location"].startswith("/console/login"), server.base


def test_a_csrf_token_from_one_session_is_refused_for_another_on_either_replica(
    replicas: list[PilotProcess],
) -> None:
    one, two = replicas
    token = (one.log.parent / "alice.token").read_text()
    first, second = _sign_in(one, token), _sign_in(two, token)
    stolen = _csrf(_page(one, first).text)
    forged = httpx.post(
        two.base + "/console/logout", data={"csrf": stolen}, cookies={COOKIE: second}, follow_redirects=False
    )
    assert forged.status_code == 403
    assert _page(one, second).status_code == 200, "a refused sign-out ended the session"
