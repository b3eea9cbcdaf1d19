"""Real OS processes against one database: no lost update, and a SIGKILL leaves a sound store."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.support import SUPPORT
from tests.support.backends import Database
from tests.support.store_helpers import recorded_schema
from vmware_pilot.config import Settings
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.store.migrations import LATEST
from vmware_pilot.store.sql import SqlStore, open_store

WORKER = SUPPORT / "store_worker.py"
PER_PROCESS = 300

pytestmark = pytest.mark.slow


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Workers started by a test; any still alive at the end are killed by pid."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _spawn(procs: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    procs.append(proc)
    return proc


def _counter_workflow(store: SqlStore) -> Workflow:
    wf = Workflow.new("counter", WorkflowState.PENDING, params={"counter": 0})
    store.workflows.create(wf)
    return wf


def _assert_consistent(store: SqlStore, workflow_id: str) -> int:
    """The counter, one audit event per committed increment, and an intact chain."""
    wf = store.workflows.load(workflow_id)
    counter = int(wf.params["counter"])
    values = [int(e.detail.rsplit("-> ", 1)[1]) for e in wf.audit_log]
    assert values == list(range(1, counter + 1))  # each value committed once, in order
    assert wf.version == counter + 1
    report = store.audit.verify_audit()
    assert report.ok, report.description
    return counter


def test_two_processes_incrementing_one_workflow_lose_no_update(
    backend_settings: Settings, procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    with open_store(backend_settings) as store:
        wf = _counter_workflow(store)
    go = tmp_path / "go"
    workers = [_spawn(procs, "increment", wf.id, str(PER_PROCESS), str(go)) for _ in range(2)]
    go.touch()
    conflicts = 0
    for proc in workers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        conflicts += json.loads(out)["conflicts"]

    with open_store(backend_settings) as store:
        assert _assert_consistent(store, wf.id) == 2 * PER_PROCESS
        actors = {e.actor for e in store.workflows.load(wf.id).audit_log}
    assert len(actors) == 2
    print(f"{2 * PER_PROCESS} increments by 2 processes, {conflicts} conflicts retried")


def test_writer_killed_at_a_random_moment_leaves_the_last_committed_state(
    backend_settings: Settings, procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    with open_store(backend_settings) as store:
        wf = _counter_workflow(store)
    report = tmp_path / "committed"
    proc = _spawn(procs, "forever", wf.id, str(report))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if report.exists() and len(report.read_text().split()) >= 40:
            break
        time.sleep(0.01)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    reported = int(report.read_text().split()[-1])

    with open_store(backend_settings) as store:
        counter = _assert_consistent(store, wf.id)
        # Committed but killed before it could write its report, at most one more.
        assert reported <= counter <= reported + 1
        again = store.workflows.load(wf.id)
        again.params["counter"] = counter + 1
        again.log("increment", f"parent -> {counter + 1}")
        store.workflows.save(again)
        assert _assert_consistent(store, wf.id) == counter + 1


def test_writer_killed_inside_its_commit_leaves_nothing_half_written(
    backend_settings: Settings, procs: list[subprocess.Popen[str]]
) -> None:
    with open_store(backend_settings) as store:
        wf = _counter_workflow(store)
    proc = _spawn(procs, "die-in-commit", wf.id, "25")
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    with open_store(backend_settings) as store:
        # The 25th transaction had written its row and event but never committed.
        assert _assert_consistent(store, wf.id) == 24
        assert len(list(store.audit.audit_events(wf.id))) == 24


def test_replicas_starting_at_once_on_an_empty_database_all_come_up(
    backend_settings: Settings, procs: list[subprocess.Popen[str]], tmp_path: Path, database: Database
) -> None:
    go = tmp_path / "go"
    openers = [_spawn(procs, "open", "-", str(go)) for _ in range(6)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < len(openers) and time.monotonic() < deadline:
        time.sleep(0.05)  # every interpreter has started and waits at the barrier
    go.touch()
    for proc in openers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert json.loads(out) == {"version": LATEST}
    with database.raw() as conn:
        assert {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM schema_meta"))} == (
            recorded_schema(LATEST)
        )
    with open_store(backend_settings) as store:
        wf = _counter_workflow(store)
        assert store.audit.verify_audit(wf.id).ok
