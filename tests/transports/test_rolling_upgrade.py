"""Upgrading replicas one by one (issue 27 point 7, docs/operations.md#upgrades): a replica of the
previous release (release/previous.json, built from git history by tests/support/release.py) and one of
this code, `vmware-pilot mcp --transport http` each, on one PostgreSQL database.

This code's migration runs while the old replica serves calls; then both serve, each reads and
acts on what the other created, nothing is lost, and the audit trail verifies with both builds.
An expansion made the way the next release's will be (store/migrations.py) keeps the old release
ready and lets a replica of it start.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

from tests.support.pg_server import PgServer
from tests.support.release import PREVIOUS, Release, ReleaseUnavailable, previous_release, tagged_commit
from tests.support.server_proc import PILOT, PilotProcess, clean_env, start_server
from tests.support.store_helpers import recorded_schema
from vmware_pilot import __version__
from vmware_pilot.store.migrations import LATEST, MIGRATIONS, migrate, needed_version
from vmware_pilot.transports.client import PilotClient, connect_http

pytestmark = pytest.mark.slow

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Off?"}}
OFF = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web-01", "confirm": True},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "web-01"},
}
HTTP = ["--transport", "http"]


@pytest.fixture
def release() -> Release:
    try:
        return previous_release()
    except ReleaseUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture
def url(pg_server: PgServer) -> Iterator[str]:
    """An empty database: the previous release creates the schema, as it did in production."""
    name = pg_server.new_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)


def _cli(command: Sequence[str], host: Path, env: dict[str, str], *args: str) -> str:
    host.mkdir(exist_ok=True)
    done = subprocess.run(
        [*command, *args],
        env=clean_env(host, env),
        cwd=host,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout.strip()


def _schema_meta(url: str) -> dict[str, str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM schema_meta"))}
    finally:
        engine.dispose()


def _stored_ids(url: str) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return set(conn.execute(text("SELECT id FROM workflows")).scalars())
    finally:
        engine.dispose()


async def _gated(client: PilotClient, name: str) -> str:
    """A workflow created and run by ``client`` up to its gate, writing a VM of its own (a run on
    this code holds the objects its writes name)."""
    vm = {"vm_name": f"vm-{name}"}
    off = {**OFF, "params": {**OFF["params"], **vm}, "rollback_params": vm}
    made = await client.call(
        "create_workflow", {"name": name, "description": "upgrade", "steps": [GATE, off]}
    )
    assert not made.is_error, made.payload
    wid = str(made.payload["workflow_id"])
    ran = await client.call("run_workflow", {"workflow_id": wid})
    assert ran.payload["state"] == "awaiting_approval", ran.payload
    return wid


async def _keep_serving(client: PilotClient, stop: asyncio.Event) -> list[str]:
    """Create and list workflows on ``client``'s replica until ``stop``; the ids created."""
    made: list[str] = []
    while True:
        wid = await _gated(client, f"during-{len(made)}")
        made.append(wid)
        listed = await client.call("list_workflows", {"limit": 500})
        assert not listed.is_error, listed.payload
        assert wid in {w["id"] for w in listed.payload["active_workflows"]}
        if stop.is_set():
            return made


def _seen(status: dict[str, Any]) -> tuple[object, ...]:
    """What two builds must agree on about a workflow."""
    return (
        status["id"],
        status["state"],
        status["created_by"],
        status["approved_by"],
        tuple(s["status"] for s in status["steps"]),
        tuple(e["action"] for e in status["audit_log"]),
    )


async def _both_agree(replicas: Sequence[PilotClient], ids: set[str]) -> dict[str, tuple[object, ...]]:
    """Every replica reads every workflow of ``ids`` alike and lists the active ones; the views."""
    views: dict[str, tuple[object, ...]] = {}
    for client in replicas:
        seen = {}
        for wid in ids:
            status = await client.call("get_workflow_status", {"workflow_id": wid})
            assert not status.is_error, (client.server_version, status.payload)
            seen[wid] = _seen(status.payload)
        assert seen == (views or seen), client.server_version
        views = seen
        listed = await client.call("list_workflows", {"limit": 500})
        active = {wid for wid, view in seen.items() if view[1] not in ("completed", "failed", "cancelled")}
        assert {w["id"] for w in listed.payload["active_workflows"]} == active, client.server_version
    return views


def _next_expansion(conn: Connection) -> None:
    """What the next release may add (docs/operations.md#upgrades): a nullable column, a table."""
    conn.execute(text("ALTER TABLE workflows ADD COLUMN next_note TEXT"))
    conn.execute(text("CREATE TABLE next_things (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"))


def _ready(server: PilotProcess) -> httpx.Response:
    return httpx.get(f"{server.base}/readyz?verbose", timeout=60)


async def test_a_replica_of_the_previous_release_and_one_of_this_code_share_one_database_through_the_upgrade(
    release: Release, url: str, tmp_path: Path
) -> None:
    # The commit is in the history (previous_release checked it); a clone that carries tags must
    # have the release's tag on exactly that commit.
    assert tagged_commit(str(PREVIOUS["tag"])) in (None, release.commit), (
        "the release's tag names another commit"
    )
    # The release runs its own code, not this checkout's.
    where, version = release.imported()
    assert Path(where).is_relative_to(release.root) and version == PREVIOUS["version"]
    assert version != __version__, "bump __version__ after a release: the two builds must be told apart"
    old_env = {"VMWARE_PILOT_DATABASE_URL": url, **release.env({})}
    new_env = {"VMWARE_PILOT_DATABASE_URL": url}
    old_cli, new_cli = release.command(), [str(PILOT)]

    # The previous release made the schema (and alice's token), as it did in production.
    alice = _cli(old_cli, tmp_path / "old-host", old_env, "token", "create", "alice")
    assert _schema_meta(url) == {"schema_version": str(PREVIOUS["schema_version"])}

    with ExitStack() as stack:
        old = stack.enter_context(start_server(tmp_path / "old-host", HTTP, env=old_env, command=old_cli))
        async with connect_http(old.url, alice) as alice_old:
            assert alice_old.server_version == release.version
            first = await _gated(alice_old, "before")

            # This code opens the database (its CLI, then its replica: each runs its migrations)
            # while the old replica keeps serving calls.
            stop = asyncio.Event()
            serving = asyncio.ensure_future(_keep_serving(alice_old, stop))
            bob = await anyio.to_thread.run_sync(
                lambda: _cli(new_cli, tmp_path / "new-host", new_env, "token", "create", "bob")
            )
            new = await anyio.to_thread.run_sync(
                stack.enter_context, start_server(tmp_path / "new-host", HTTP, env=new_env)
            )
            stop.set()
            with anyio.fail_after(120):
                during = await serving
            assert _schema_meta(url) == recorded_schema(LATEST)
            assert needed_version(LATEST) <= int(str(PREVIOUS["schema_version"]))

            async with (
                connect_http(new.url, bob) as bob_new,
                connect_http(old.url, bob) as bob_old,  # a token made by this code, on the old replica
                connect_http(new.url, alice) as alice_new,  # and the other way round
            ):
                assert bob_new.server_version == __version__
                second = await _gated(bob_new, "after")
                ids = {first, second, *during}
                # each approves, on the replica of the other build, what the other created there
                approved = await bob_new.call("approve", {"workflow_id": first})
                assert not approved.is_error and approved.payload["approved_by"] == "token:bob", (
                    approved.payload
                )
                approved = await alice_old.call("approve", {"workflow_id": second})
                assert not approved.is_error and approved.payload["approved_by"] == "token:alice", (
                    approved.payload
                )
                cancelled = await alice_new.call(
                    "cancel_workflow", {"workflow_id": during[0], "reason": "upgrade test", "confirm": True}
                )
                assert not cancelled.is_error and cancelled.payload["state"] == "cancelled", cancelled.payload
                replicas = (alice_old, bob_old, alice_new, bob_new)
                views = await _both_agree(replicas, ids)
                assert views[first][3] == "token:bob" and views[second][3] == "token:alice"
                assert views[during[0]][1] == "cancelled"
                assert _stored_ids(url) == ids, "nothing lost, nothing made twice"
                for command, host, env in ((old_cli, "old-host", old_env), (new_cli, "new-host", new_env)):
                    _cli(command, tmp_path / host, env, "audit", "verify")

                # The next release expands the schema the way store/migrations.py records it: the
                # old release stays ready, and a replica of it still starts.
                engine = create_engine(url, poolclass=NullPool)
                with engine.begin() as conn:
                    assert migrate(conn, (*MIGRATIONS, _next_expansion)) == LATEST + 1
                engine.dispose()
                assert _schema_meta(url) == recorded_schema(LATEST + 1)
                for server in (old, new):
                    assert _ready(server).status_code == 200, _ready(server).text
                (tmp_path / "old-host-2").mkdir()
                restarted = await anyio.to_thread.run_sync(
                    stack.enter_context,
                    start_server(tmp_path / "old-host-2", HTTP, env=old_env, command=old_cli),
                )
                async with connect_http(restarted.url, alice) as alice_again:
                    assert alice_again.server_version == release.version
                    third = await _gated(alice_again, "expanded")
                    ids.add(third)
                    await _both_agree((alice_again, alice_old, bob_new), ids)
                assert _stored_ids(url) == ids
                assert _ready(restarted).status_code == 200
    _cli(new_cli, tmp_path / "new-host", new_env, "audit", "verify")
    _cli(old_cli, tmp_path / "old-host", old_env, "audit", "verify")
