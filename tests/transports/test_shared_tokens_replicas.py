"""Tokens across replicas: two `vmware-pilot mcp --transport http` processes, each with its own
pilot home (two hosts) and one shared database. A token created once with the CLI against the
database URL is accepted by both, also one created while they run; a revoked one by neither."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.support.backends import Database
from tests.support.http_replicas import cli
from tests.support.server_proc import INIT, PilotProcess, start_server

pytestmark = pytest.mark.slow


def _status(server: PilotProcess, secret: str) -> int:
    headers = {"Authorization": f"Bearer {secret}", "Accept": "application/json, text/event-stream"}
    return httpx.post(server.url, json=INIT, headers=headers, timeout=60).status_code


@pytest.fixture
def hosts(database: Database, tmp_path: Path) -> list[Path]:
    folders = [tmp_path / "host-a", tmp_path / "host-b", tmp_path / "operator"]
    for folder in folders:
        folder.mkdir()
    return folders


@pytest.fixture
def replicas(database: Database, hosts: list[Path]) -> Iterator[list[PilotProcess]]:
    cli(hosts[2], database.raw_url, "token", "create", "alice")
    env = {"VMWARE_PILOT_DATABASE_URL": database.raw_url}
    with ExitStack() as stack:
        yield [stack.enter_context(start_server(h, ["--transport", "http"], env=env)) for h in hosts[:2]]


def test_a_token_made_once_against_the_database_works_on_both_replicas(
    database: Database, hosts: list[Path], replicas: list[PilotProcess]
) -> None:
    for host in hosts:
        assert not (host / ".vmware" / "tokens.json").exists()
    # made on the operator's host while both replicas run: no restart needed
    secret = cli(hosts[2], database.raw_url, "token", "create", "bob", "--role", "reader")
    for server in replicas:
        assert _status(server, secret) == 200, server.stderr()
        assert _status(server, secret + "x") == 401
    cli(hosts[2], database.raw_url, "token", "revoke", "bob")
    for server in replicas:
        assert _status(server, secret) == 401
