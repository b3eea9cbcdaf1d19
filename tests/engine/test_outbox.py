"""The notification outbox on each backend: events written with the workflow change, delivered at
least once by any Pilot process on the database, with a stable Idempotency-Key."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import text

from tests.support.backends import Database
from tests.support.fakes import ScriptedDispatcher
from tests.support.receiver import Receiver, serve
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, RunRequest

SECRET = "webhook-key-2"
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
READ = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}


def pilot(backend_settings: Settings, database: Database, receiver: Receiver, **extra: Any) -> PilotApp:
    values = {"notify_url": receiver.url, "notify_secret": SECRET, "notify_timeout": 2.0, **extra}
    configured = Settings(home=backend_settings.home, database_url=database.settings_url, **values)
    return build_app(configured, dispatcher=ScriptedDispatcher())


def rows(database: Database) -> list[tuple[str, str, int, str]]:
    with database.raw() as conn:
        found = conn.execute(
            text("SELECT event_id, status, attempts, body FROM notifications ORDER BY created_at")
        )
        return [(str(r[0]), str(r[1]), int(r[2]), str(r[3])) for r in found]


@pytest.mark.slow
async def test_an_event_committed_by_a_pilot_that_died_is_delivered_by_another(
    backend_settings: Settings, database: Database, actor: Actor
) -> None:
    with serve(Receiver()) as receiver:
        first = pilot(backend_settings, database, receiver)
        # This process's sender is gone (as after a crash right after its commit).
        assert first.notifier is not None and first.notifier.close(5) is True
        wid = first.service.create_workflow(CreateRequest(actor, "outbox", "d", [READ, GATE])).payload()[
            "workflow_id"
        ]
        (await first.service.run_workflow(RunRequest(actor, wid))).payload()
        ((event_id, status, attempts, body),) = rows(database)
        assert (status, attempts, receiver.attempts) == ("pending", 0, 0)
        assert SECRET not in body
        first.close()

        second = pilot(backend_settings, database, receiver)
        try:
            (got,) = receiver.wait_for(1)
        finally:
            assert second.notifier is not None and second.notifier.close(10) is True
            second.close()
    assert got.event["event"] == "awaiting_approval" and got.event["workflow_id"] == wid
    assert got.headers["Idempotency-Key"] == event_id == got.event["event_id"]
    assert rows(database)[0][1:3] == ("delivered", 1)


@pytest.mark.slow
async def test_every_attempt_carries_the_events_key_and_a_dropped_event_is_marked(
    backend_settings: Settings, database: Database, actor: Actor
) -> None:
    with serve(Receiver(statuses=[500] * 4)) as receiver:
        app = pilot(backend_settings, database, receiver, notify_attempts=2)
        try:
            wid = app.service.create_workflow(CreateRequest(actor, "outbox", "d", [GATE])).payload()[
                "workflow_id"
            ]
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            receiver.wait_attempts(2)
        finally:
            assert app.notifier is not None and app.notifier.close(10) is True
            app.close()
    ((event_id, status, attempts, _),) = rows(database)
    assert (status, attempts) == ("dropped", 2)
    assert receiver.keys == [event_id, event_id] and receiver.received == []


async def test_two_pilots_on_one_database_deliver_each_event_once(
    backend_settings: Settings, database: Database, actor: Actor
) -> None:
    with serve(Receiver()) as receiver:
        apps = [pilot(backend_settings, database, receiver) for _ in range(2)]
        try:
            for n in range(6):
                app = apps[n % 2]
                wid = app.service.create_workflow(CreateRequest(actor, "outbox", "d", [GATE])).payload()[
                    "workflow_id"
                ]
                (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            got = receiver.wait_for(6)
        finally:
            for app in apps:
                assert app.notifier is not None and app.notifier.close(10) is True
                app.close()
    keys = [r.headers["Idempotency-Key"] for r in got]
    assert len(set(keys)) == 6 == receiver.attempts
    assert {(s, n) for _, s, n, _ in rows(database)} == {("delivered", 1)}


def _age(database: Database, seconds: float) -> None:
    """Make every outbox row ``seconds`` older than it is."""
    with database.raw() as conn:
        conn.execute(text("UPDATE notifications SET created_at = created_at - :s"), {"s": seconds})


@pytest.mark.slow
async def test_delivered_and_dropped_rows_past_the_retention_are_pruned_and_pending_ones_never(
    backend_settings: Settings, database: Database, actor: Actor
) -> None:
    with serve(Receiver()) as receiver:
        app = pilot(backend_settings, database, receiver)
        try:
            for _ in range(2):
                wid = app.service.create_workflow(CreateRequest(actor, "outbox", "d", [GATE])).payload()[
                    "workflow_id"
                ]
                (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            receiver.wait_for(2)
        finally:
            assert app.notifier is not None and app.notifier.close(10) is True
        delivered, other = rows(database)
        with database.raw() as conn:  # one given up on, and one still waiting for its turn
            conn.execute(
                text("UPDATE notifications SET status = 'dropped' WHERE event_id = :e"), {"e": other[0]}
            )
        app.store.outbox.enqueue_notices([("pending-1", "wf", b"{}")])
        _age(database, 3 * 3600)
        app.store.outbox.enqueue_notices([("pending-2", "wf", b"{}")])
        try:
            assert app.store.outbox.prune_notices(4 * 3600) == 0, "nothing is past a retention of 4 h"
            assert app.store.outbox.prune_notices(2 * 3600) == 2
            assert sorted(r[0] for r in rows(database)) == ["pending-1", "pending-2"]
            assert app.store.outbox.notice_counts() == {"pending": 2}
        finally:
            app.close()
    assert delivered[1] == "delivered"


@pytest.mark.slow
async def test_a_sending_pilot_prunes_the_outbox_on_its_own(
    backend_settings: Settings, database: Database, actor: Actor
) -> None:
    with serve(Receiver()) as receiver:
        # 0.001 h = 3.6 s: the sender deletes the row once it is older than that.
        app = pilot(backend_settings, database, receiver, notify_retention_hours=0.001)
        try:
            wid = app.service.create_workflow(CreateRequest(actor, "outbox", "d", [GATE])).payload()[
                "workflow_id"
            ]
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            receiver.wait_for(1)
            _age(database, 3600)
            deadline = time.monotonic() + 60  # a guard against hanging, not a timing claim
            while rows(database):
                assert time.monotonic() < deadline, "the delivered row was never pruned"
                time.sleep(0.1)
        finally:
            assert app.notifier is not None and app.notifier.close(10) is True
            app.close()


# 307: urllib already refused to re-send a POST there, a guard only (the slow tier runs it).
@pytest.mark.parametrize("status", [302, pytest.param(307, marks=pytest.mark.slow)])
async def test_a_redirect_is_never_followed_and_counts_as_a_failed_attempt(
    backend_settings: Settings, database: Database, actor: Actor, status: int
) -> None:
    with serve(Receiver()) as elsewhere, serve(Receiver(statuses=[status])) as receiver:
        receiver.location = elsewhere.url
        app = pilot(backend_settings, database, receiver, notify_attempts=1)
        try:
            wid = app.service.create_workflow(CreateRequest(actor, "outbox", "d", [GATE])).payload()[
                "workflow_id"
            ]
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            receiver.wait_attempts(1)
        finally:
            assert app.notifier is not None and app.notifier.close(10) is True
            app.close()
    # The signed POST went to the configured URL only, and was not taken as delivered.
    assert (elsewhere.attempts, elsewhere.other_requests) == (0, [])
    ((_, outcome, attempts, _),) = rows(database)
    assert (outcome, attempts) == ("dropped", 1)
