"""/livez and /readyz: Kubernetes-style probes, open to anyone, each check named with ?verbose.

In-process on SQLite for the checks themselves; a real `vmware-pilot mcp --transport http` on a
PostgreSQL server of the test's own, stopped and started under it, for the 503 and the recovery.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.pg_server import PgServer
from tests.support.server_proc import PILOT, clean_env, start_server
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore


def _client(app: PilotApp, home: Path) -> httpx.AsyncClient:
    tokens = TokenStore(home / "tokens.json")
    tokens.create("alice", "admin")
    asgi = build_http_app(app, HttpOptions("http"), 8080, tokens, RoleBook(home / "r.yaml", TOOL_NAMES))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1:8080")


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


async def test_probes_need_no_token_nor_a_known_host_and_name_each_check(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    async with _client(pilot_app, pilot_home) as client:
        live = await client.get("/livez", headers={"host": "10.1.2.3:8080"})
        assert (live.status_code, live.text) == (200, "ok\n")
        ready = await client.get("/readyz?verbose", headers={"host": "10.1.2.3:8080"})
        assert ready.status_code == 200, ready.text
        lines = ready.text.splitlines()
        assert [line.split(" ")[0] for line in lines[:3]] == ["[+]database", "[+]skills", "[+]oauth"]
        assert "schema version" in lines[0]
        assert lines[-1] == "readyz check passed"
        assert (await client.get("/readyz")).text == "ok\n"
        assert (await client.head("/readyz/")).status_code == 200
        assert (await client.post("/livez")).status_code == 405
        assert (await client.get("/healthz")).json() == {"status": "ok"}


async def test_readyz_fails_when_a_configured_skill_server_is_missing(
    pilot_home: Path, settings: Settings
) -> None:
    chosen = Settings(home=pilot_home, dispatch="stdio", skill_commands={"aria": "no-such-aria-server-here"})
    app = build_app(chosen)
    try:
        async with _client(app, pilot_home) as client:
            ready = await client.get("/readyz?verbose")
            assert ready.status_code == 503
            assert "[-]skills failed: not found: aria" in ready.text
            assert "[+]database ok" in ready.text
            assert ready.text.endswith("readyz check failed\n")
            assert (await client.get("/readyz")).text == "readyz check failed\n"
            assert (await client.get("/livez")).status_code == 200
    finally:
        app.close()


async def test_readyz_fails_when_the_database_schema_is_not_the_one_this_build_needs(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    from sqlalchemy import text

    with pilot_app.store.database.engine.begin() as conn:
        conn.execute(text("UPDATE schema_meta SET value = '999' WHERE key = 'schema_version'"))
    async with _client(pilot_app, pilot_home) as client:
        ready = await client.get("/readyz?verbose")
    assert ready.status_code == 503
    assert "[-]database failed: schema version 999" in ready.text


async def test_readyz_passes_on_a_schema_the_next_release_expanded(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    from sqlalchemy import text

    from vmware_pilot.store.migrations import LATEST

    # As store/migrations.py records an expansion: schema_version stays, schema_applied moves on.
    with pilot_app.store.database.engine.begin() as conn:
        conn.execute(text("DELETE FROM schema_meta WHERE key = 'schema_applied'"))
        conn.execute(
            text("INSERT INTO schema_meta (key, value) VALUES ('schema_applied', :v)"), {"v": str(LATEST + 1)}
        )
    async with _client(pilot_app, pilot_home) as client:
        ready = await client.get("/readyz?verbose")
    assert ready.status_code == 200, ready.text
    assert f"[+]database ok (schema version {LATEST + 1})" in ready.text


@pytest.mark.slow
def test_a_real_server_is_not_ready_while_its_database_is_down_and_ready_again_after(
    own_pg: PgServer, tmp_path: Path
) -> None:
    url = own_pg.url(own_pg.new_database())
    env = {"VMWARE_PILOT_DATABASE_URL": url}
    made = subprocess.run(
        [str(PILOT), "token", "create", "alice"], env=clean_env(tmp_path, env), cwd=tmp_path,
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    with start_server(tmp_path, ["--transport", "http"], env=env) as server:
        ready = httpx.get(server.base + "/readyz?verbose", timeout=30)
        assert ready.status_code == 200, ready.text
        assert "[+]database ok" in ready.text
        own_pg.halt()
        try:
            down = httpx.get(server.base + "/readyz?verbose", timeout=30)
            assert down.status_code == 503
            assert "[-]database failed: unreachable" in down.text
            assert "127.0.0.1" not in down.text and "pilot_test" not in down.text  # nothing of the URL
            assert httpx.get(server.base + "/livez", timeout=30).status_code == 200
        finally:
            own_pg.resume()
        again = httpx.get(server.base + "/readyz?verbose", timeout=30)
        assert again.status_code == 200, again.text
    assert "Traceback" not in server.stderr()
