"""`vmware-pilot audit verify|export` through the CLI entry point, on a database tampered with by hand."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.store_helpers import raw_db, sample_workflow
from vmware_pilot.app import build_app
from vmware_pilot.cli.main import app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, FromTemplateRequest
from vmware_pilot.store.audit import event_hash
from vmware_pilot.store.connection import make_engine
from vmware_pilot.store.migrations import MIGRATIONS, migrate
from vmware_pilot.store.sql import open_store

runner = CliRunner()


@pytest.fixture
def trail(settings: Settings) -> tuple[str, str]:
    """Two workflows; the first has five audit events (seq 1-4 and 6), the second one (seq 5)."""
    with open_store(settings) as store:
        first, second = sample_workflow(), sample_workflow()
        for action in ("created", "run_started", "step_completed"):
            first.log(action, f"{action} detail", actor="alice")
        store.workflows.create(first)
        first.log("awaiting_approval", "Step 1: require_approval", actor="alice")
        store.workflows.save(first)
        second.log("created", "other", actor="bob")
        store.workflows.create(second)
        first.log("approved", "Approved by bob", actor="bob")
        store.workflows.save(first)
    return first.id, second.id


@pytest.fixture
def tamper(settings: Settings, trail: tuple[str, str]) -> Iterator[Callable[[str, tuple[object, ...]], None]]:
    """Run SQL on the database file directly, with the append-only triggers dropped first."""
    conn = raw_db(settings.home_path / "pilot.db")
    conn.execute("DROP TRIGGER audit_events_no_update")
    conn.execute("DROP TRIGGER audit_events_no_delete")

    def run(sql: str, args: tuple[object, ...] = ()) -> None:
        conn.execute(sql, args)

    yield run
    conn.close()


def _verify(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["audit", "verify", *args])
    return result.exit_code, result.output


def _row(settings: Settings, seq: int) -> tuple[str, ...]:
    with sqlite3.connect(settings.home_path / "pilot.db") as conn:
        row = conn.execute(
            "SELECT workflow_id, ts, actor, action, detail, prev_hash, hash FROM audit_events WHERE seq = ?",
            (seq,),
        ).fetchone()
    return tuple(row)


def test_verify_passes_on_an_intact_trail_and_reports_what_it_checked(trail: tuple[str, str]) -> None:
    code, out = _verify()
    assert code == 0, out
    assert "intact: 6 event(s) in 2 workflow(s)" in out
    code, out = _verify("--workflow", trail[0])
    assert code == 0, out
    assert f"5 event(s) in workflow {trail[0]}" in out


def test_altered_detail_is_named(trail: tuple[str, str], tamper: Callable[..., None]) -> None:
    tamper("UPDATE audit_events SET detail = 'Approved by mallory' WHERE seq = 4")
    code, out = _verify()
    assert code == 1
    assert "event seq 4" in out and "altered" in out
    code, out = _verify("--workflow", trail[1])
    assert code == 0, out  # the other workflow's chain is untouched


def test_deleted_middle_event_is_named(trail: tuple[str, str], tamper: Callable[..., None]) -> None:
    tamper("DELETE FROM audit_events WHERE seq = 2")
    code, out = _verify("--workflow", trail[0])
    assert code == 1
    assert "event seq 3" in out and "deleted" in out


def test_deleted_last_event_is_detected_from_the_head_on_the_workflow_row(
    trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    tamper("DELETE FROM audit_events WHERE seq = 6")
    code, out = _verify()
    assert code == 1
    assert f"workflow {trail[0]} records 5 events but 4 are stored" in out
    assert "after seq 4 were deleted" in out


def test_event_inserted_in_the_middle_with_a_valid_hash_is_named(
    settings: Settings, trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    wid, _ts, actor, _action, _detail, _prev, prev_hash = _row(settings, 2)
    ts = "2026-01-01T00:00:00.000000+00:00"
    forged = event_hash(prev_hash, wid, ts, actor, "approved", "Approved by mallory")
    # Make room after seq 2 (highest first, so the primary key never collides), then slip it in.
    for seq in (6, 5, 4, 3):
        tamper("UPDATE audit_events SET seq = seq + 1 WHERE seq = ?", (seq,))
    tamper(
        "INSERT INTO audit_events (seq, workflow_id, ts, actor, action, detail, prev_hash, hash) "
        "VALUES (3, ?, ?, ?, 'approved', 'Approved by mallory', ?, ?)",
        (wid, ts, actor, prev_hash, forged),
    )
    code, out = _verify()
    assert code == 1
    assert "event seq 3" in out and "inserted" in out


def test_event_appended_outside_vmware_pilot_is_named(
    settings: Settings, trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    wid, *_rest, last_hash = _row(settings, 6)
    ts = "2026-01-01T00:00:00.000000+00:00"
    forged = event_hash(last_hash, wid, ts, "mallory", "approved", "x")
    tamper(
        "INSERT INTO audit_events (seq, workflow_id, ts, actor, action, detail, prev_hash, hash) "
        "VALUES (100, ?, ?, 'mallory', 'approved', 'x', ?, ?)",
        (wid, ts, last_hash, forged),
    )
    code, out = _verify()
    assert code == 1
    assert "event seq 100" in out and "inserted" in out


def test_two_swapped_events_are_named_as_reordered(
    trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    tamper("UPDATE audit_events SET seq = -1 WHERE seq = 2")
    tamper("UPDATE audit_events SET seq = 2 WHERE seq = 3")
    tamper("UPDATE audit_events SET seq = 3 WHERE seq = -1")
    code, out = _verify()
    assert code == 1
    assert "event seq 2" in out and "reordered" in out


def test_event_of_a_workflow_that_does_not_exist_is_named(
    tamper: Callable[..., None], trail: tuple[str, str]
) -> None:
    tamper(
        "INSERT INTO audit_events (workflow_id, ts, actor, action, detail, prev_hash, hash) "
        "VALUES ('wf-ghost', 't', 'a', 'b', 'c', 'd', 'e')"
    )
    code, out = _verify()
    assert code == 1
    assert "belongs to no stored workflow" in out


def test_verify_of_an_unknown_workflow_is_an_error_with_a_hint(trail: tuple[str, str]) -> None:
    code, out = _verify("--workflow", "wf-20260101-000000-000000")
    assert code == 2
    assert "not found" in out and "hint:" in out


def test_export_prints_one_json_object_per_event_in_commit_order(trail: tuple[str, str]) -> None:
    result = runner.invoke(app, ["audit", "export", "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["seq"] for e in lines] == [1, 2, 3, 4, 5, 6]
    assert set(lines[0]) == {"seq", "workflow_id", "ts", "actor", "action", "detail", "prev_hash", "hash"}
    assert lines[4]["workflow_id"] == trail[1]
    assert lines[3]["detail"] == "Step 1: require_approval"

    one = runner.invoke(app, ["audit", "export", "--workflow", trail[1], "--format", "jsonl"])
    assert [json.loads(line)["seq"] for line in one.stdout.splitlines()] == [5]


def test_export_refuses_an_unknown_format(trail: tuple[str, str]) -> None:
    result = runner.invoke(app, ["audit", "export", "--format", "csv"])
    assert result.exit_code != 0
    assert "jsonl" in result.output


@pytest.mark.slow  # the entry point's process; in-process: test_verify_passes_on_an_intact_trail_…
def test_audit_commands_work_from_the_installed_console_script(trail: tuple[str, str]) -> None:
    script = Path(sys.executable).with_name("vmware-pilot")
    done = subprocess.run(
        [str(script), "audit", "verify"], capture_output=True, text=True, env=os.environ.copy(), check=False
    )
    assert done.returncode == 0, done.stderr
    assert "intact" in done.stdout


@pytest.mark.parametrize("command", ["verify", "export"])
def test_invalid_settings_are_an_error_with_a_hint_not_a_traceback(command: str) -> None:
    result = runner.invoke(app, ["audit", command], env={"VMWARE_PILOT_DISPATCH_TIMEOUT": "soon"})

    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "invalid settings" in result.stderr and "VMWARE_PILOT_DISPATCH_TIMEOUT" in result.stderr
    assert "hint: fix the VMWARE_PILOT_* environment variables" in result.stderr


def test_a_home_that_cannot_be_used_is_an_error_with_a_hint(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "home-file"
    not_a_folder.write_text("")
    result = runner.invoke(app, ["audit", "verify"], env={"VMWARE_PILOT_HOME": str(not_a_folder)})

    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Cannot open the workflow store" in result.stderr
    assert "hint: Point VMWARE_PILOT_HOME" in result.stderr


def test_a_workflow_deleted_with_all_its_events_leaves_a_gap_that_is_named(
    trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    _first, second = trail  # its only event is seq 5
    tamper("DELETE FROM audit_events WHERE workflow_id = ?", (second,))
    tamper("DELETE FROM workflows WHERE id = ?", (second,))
    code, out = _verify()
    assert code == 1
    assert "events seq 5 are missing" in out and "deleted" in out


def test_the_newest_workflow_deleted_with_its_events_is_found_from_the_numbers_issued(
    settings: Settings, trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    with open_store(settings) as store:
        newest = sample_workflow()
        newest.log("created", "x", actor="carol")
        newest.log("run_started", "", actor="carol")
        store.workflows.create(newest)  # seq 7 and 8
    tamper("DELETE FROM audit_events WHERE workflow_id = ?", (newest.id,))
    tamper("DELETE FROM workflows WHERE id = ?", (newest.id,))
    code, out = _verify()
    assert code == 1
    assert "events seq 7 to 8 were recorded but are no longer stored" in out


def test_a_workflow_row_deleted_without_its_events_is_named(
    trail: tuple[str, str], tamper: Callable[..., None]
) -> None:
    tamper("DELETE FROM workflows WHERE id = ?", (trail[1],))
    code, out = _verify()
    assert code == 1
    assert "event seq 5" in out and "its workflow's row was deleted" in out


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("UPDATE workflows SET document = replace(document, 'web-01', 'db-01') WHERE id = ?", "the plan"),
        (
            "UPDATE workflows SET document = replace(document, '\"alice\"', '\"mallory\"') WHERE id = ?",
            "creator",
        ),
        ("UPDATE workflows SET created_by = 'mallory' WHERE id = ?", "creator column"),
        (
            'UPDATE workflows SET document = replace(document, \'"approved_by":""\', '
            '\'"approved_by":"mallory"\') WHERE id = ?',
            "approver",
        ),
        ("UPDATE workflows SET state = 'completed', is_active = 0 WHERE id = ?", "state"),
    ],
)
def test_an_edit_of_the_stored_workflow_fails_verify(
    trail: tuple[str, str], tamper: Callable[..., None], sql: str, what: str
) -> None:
    before = _verify()
    tamper(sql, (trail[1],))
    code, out = _verify()
    assert before[0] == 0 and code == 1, (what, out)
    assert f"the stored record of workflow {trail[1]}" in out and "changed outside vmware-pilot" in out
    assert _verify("--workflow", trail[0])[0] == 0, "the other workflow is still intact"


def test_creating_a_workflow_is_the_first_event_of_its_trail(settings: Settings) -> None:
    pilot = build_app(settings)
    try:
        step = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines"}
        wid = pilot.service.create_workflow(CreateRequest(Actor("alice"), "tidy", "d", [step])).payload()[
            "workflow_id"
        ]
        from_template = pilot.service.create_workflow_from_template(
            FromTemplateRequest(
                Actor("bob"), "incident_response", {"alert_entity": "web-01", "alert_name": "CPU"}
            )
        ).payload()["workflow_id"]
    finally:
        pilot.close()
    for workflow_id, actor, detail in (
        (wid, "alice", "Custom workflow with 1 steps"),
        (from_template, "bob", ""),
    ):
        result = runner.invoke(app, ["audit", "export", "--workflow", workflow_id])
        first = json.loads(result.output.splitlines()[0])
        assert (first["action"], first["actor"]) == ("workflow_created", actor)
        assert detail in first["detail"]
    assert _verify()[0] == 0


@pytest.mark.empty_database
def test_a_database_from_before_seals_verifies_after_the_upgrade_and_catches_later_edits(
    settings: Settings,
) -> None:
    settings.home_path.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    with engine.begin() as conn:
        migrate(conn, MIGRATIONS[:3])
    engine.dispose()
    db = settings.home_path / "pilot.db"
    with raw_db(db) as conn:  # written as vmware-pilot did before: the head is the last event's hash
        head = "0" * 64
        for i, action in enumerate(("draft_created", "steps_updated")):
            ts = f"2026-01-01T00:00:0{i}.000000+00:00"
            digest = event_hash(head, "wf-old", ts, "alice", action, "")
            conn.execute(
                "INSERT INTO audit_events (workflow_id, ts, actor, action, detail, prev_hash, hash) "
                "VALUES ('wf-old', ?, 'alice', ?, '', ?, ?)",
                (ts, action, head, digest),
            )
            head = digest
        conn.execute(
            "INSERT INTO workflows (id, type, state, version, created_at, updated_at, created_by, document, "
            "audit_head, audit_count, is_active) VALUES ('wf-old', 't', 'draft', 2, 'c', 'u', 'alice', "
            '\'{"id": "wf-old"}\', ?, 2, 1)',
            (head,),
        )
    code, out = _verify()
    assert code == 0 and "intact: 2 event(s) in 1 workflow(s)" in out, out
    with raw_db(db) as conn:
        conn.execute('UPDATE workflows SET document = \'{"id": "wf-old", "x": 1}\'')
    assert _verify()[0] == 1
