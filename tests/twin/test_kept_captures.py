"""Captures kept in the database when one is shared (VMWARE_PILOT_DATABASE_URL set), on SQLite and
PostgreSQL, in process: stored packed with their record, listed and removed through the CLI,
unpacked for a rehearsal with every member and the digest checked, a capture over the size limit
refused with nothing stored; and the simulator's start with its memory bounded (the arguments,
the environment and the limit the child sets), and the reasons that name the limit."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import os
import resource
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import text
from typer.testing import CliRunner

from tests.support.backends import Database
from tests.support.captures import make_capture
from vmware_pilot.cli.main import app
from vmware_pilot.config import Settings
from vmware_pilot.domain.model import Step
from vmware_pilot.errors import DatabaseUnavailable, PilotError
from vmware_pilot.store.sql import SqlStore, open_store
from vmware_pilot.twin.captures import Capture, digest_of, list_captures
from vmware_pilot.twin.rehearse import Rehearser, TwinSettings
from vmware_pilot.twin.shelf import CaptureShelf, pack
from vmware_pilot.twin.simulator import simulator_spawn, stopped_reason

runner = CliRunner()


@pytest.fixture
def store(database: Database, pilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlStore]:
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    with open_store(Settings(home=pilot_home, database_url=database.raw_url)) as opened:
        yield opened


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder Pilot's own temporary folders go to, to see them removed."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def folder_capture(root: Path, capture_id: str, at: str) -> Capture:
    """A capture made in ``root`` (as `twin capture` makes one before it is stored)."""
    path = make_capture(root, capture_id, at)
    record = {**json.loads((path / "capture.json").read_text()), "target": capture_id.rsplit("-", 1)[0]}
    return Capture(**record, path=str(path))


def tar_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_captures_are_kept_listed_unpacked_and_removed_in_the_database(
    store: SqlStore, database: Database, pilot_home: Path, tmp_path: Path
) -> None:
    shelf = CaptureShelf(pilot_home, store.captures)
    assert shelf.where == "the database"
    made = tmp_path / "made"
    old = shelf.keep(folder_capture(made, "lab-20260101T000000Z", "2026-01-01T00:00:00Z"))
    new = shelf.keep(folder_capture(made, "lab-20260102T000000Z", "2026-01-02T00:00:00Z"))
    shelf.keep(folder_capture(made, "prod-20260103T000000Z", "2026-01-03T00:00:00Z"))
    assert old.path == "" and new.objects == 2 and new.digest.startswith("sha256:")
    assert not (pilot_home / "twins").exists()  # nothing in the Pilot home
    with pytest.raises(PilotError, match="in the database already"):
        shelf.keep(folder_capture(tmp_path / "again", "lab-20260102T000000Z", "2026-01-02T00:00:00Z"))

    listed = runner.invoke(app, ["twin", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["id"] for r in rows] == [
        "prod-20260103T000000Z",
        "lab-20260102T000000Z",
        "lab-20260101T000000Z",
    ]
    assert rows[1] == {**new.public(), "age_hours": rows[1]["age_hours"]} and rows[1]["age_hours"] > 24
    table = runner.invoke(app, ["twin", "list"], env={"COLUMNS": "200"})
    assert "Captures in the database" in table.stdout and "(stale)" in table.stdout

    # The rehearsal's capture of a target: the newest, unpacked into a folder and checked.
    latest = shelf.latest("lab")
    assert latest == new
    into = tmp_path / "unpacked"
    into.mkdir()
    loadable = shelf.materialise(latest, into)
    assert loadable.path == str(into) and digest_of(loadable.objects_dir) == (new.digest, 2)
    assert (loadable.objects_dir / "0001-VirtualMachine-vm-57.xml").read_bytes() == (
        made / "twins" / new.id / "objects" / "0001-VirtualMachine-vm-57.xml"
    ).read_bytes()
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in loadable.objects_dir.iterdir())  # files 0600

    removed = runner.invoke(app, ["twin", "remove", old.id, "--json"])
    assert removed.exit_code == 0, removed.output
    assert json.loads(removed.stdout)["removed"]["id"] == old.id
    assert [c.id for c in shelf.list()] == ["prod-20260103T000000Z", "lab-20260102T000000Z"]
    again = runner.invoke(app, ["twin", "remove", old.id])
    assert again.exit_code != 0 and f"no capture '{old.id}' in the database" in again.stderr
    with database.raw() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM twin_captures")).scalar() == 2


def test_a_stored_capture_that_is_not_what_its_record_says_is_refused_unpacked(
    store: SqlStore, database: Database, pilot_home: Path, tmp_path: Path
) -> None:
    shelf = CaptureShelf(pilot_home, store.captures)
    kept = shelf.keep(folder_capture(tmp_path / "made", "lab-20260102T000000Z", "2026-01-02T00:00:00Z"))
    bodies = {
        # Another inventory under the same record: its digest differs.
        "does not match its digest": tar_of({"objects/0000-ServiceInstance-ServiceInstance.xml": b"<x/>"}),
        # Members that would land outside the folder, or are not files.
        "not a file of its objects": tar_of({"objects/../../escaped.xml": b"<x/>"}),
        "cannot be unpacked": b"not a tar at all",
    }
    for said, body in bodies.items():
        with database.raw() as conn:
            conn.execute(
                text("UPDATE twin_captures SET body = :b WHERE id = :id"), {"b": body, "id": kept.id}
            )
        into = tmp_path / said.replace(" ", "-")
        into.mkdir()
        with pytest.raises(PilotError, match=said) as refused:
            shelf.materialise(kept, into)
        assert refused.value.hint
    assert not (tmp_path / "escaped.xml").exists() and not (tmp_path.parent / "escaped.xml").exists()


def test_a_capture_over_the_size_limit_is_refused_and_nothing_stored(
    store: SqlStore, pilot_home: Path, tmp_path: Path
) -> None:
    made = folder_capture(tmp_path / "made", "lab-20260102T000000Z", "2026-01-02T00:00:00Z")
    (made.objects_dir / "0002-VirtualMachine-vm-58.xml").write_bytes(os.urandom(64 * 1024))
    small = CaptureShelf(pilot_home, store.captures, max_bytes=16 * 1024)
    with pytest.raises(PilotError) as refused:
        small.keep(made)
    assert "a capture kept in the database may be at most 16384 bytes; nothing was stored" in (
        refused.value.message
    )
    assert "VMWARE_PILOT_TWIN_MEMORY_MB" in refused.value.hint
    assert small.list() == [] and store.captures.capture_rows() == []
    assert len(pack(made.objects_dir)) > 64 * 1024  # the default limit takes it


def test_a_rehearsal_from_a_stored_capture_that_fails_its_digest_is_unknown_and_leaves_nothing(
    store: SqlStore, database: Database, pilot_home: Path, tmp_path: Path, scratch: Path
) -> None:
    shelf = CaptureShelf(pilot_home, store.captures)
    kept = shelf.keep(folder_capture(tmp_path / "made", "lab-20260102T000000Z", "2026-01-02T00:00:00Z"))
    with database.raw() as conn:
        body = tar_of({"objects/0000-ServiceInstance-ServiceInstance.xml": b"<other/>"})
        conn.execute(text("UPDATE twin_captures SET body = :b WHERE id = :id"), {"b": body, "id": kept.id})
    steps = [Step(1, "off", "aiops", "power_off_vm", {"vm_name": "DC0_H0_VM0", "target": "lab"})]
    twin = Rehearser(
        TwinSettings(mode="required", home=pilot_home, vcsim="/bin/true", govc="/bin/true"), shelf
    )
    record = asyncio.run(twin.rehearse(steps, steps, {}, lambda step, _: dict(step.params)))
    assert record is not None and (record["status"], record["verdict"]) == ("unknown", "unknown")
    assert record["capture"]["id"] == kept.id and "does not match its digest" in record["reason"]
    assert list(scratch.iterdir()) == []  # the unpacked folder is gone
    # The Pilot home's captures are not the database's: a Rehearser on the home finds none there.
    assert list_captures(pilot_home) == []


def test_the_simulator_starts_bounded_and_a_stop_names_the_limit() -> None:
    spawn = simulator_spawn(
        "/opt/vcsim",
        Path("/caps/objects"),
        "twin",
        "pw",
        2048,
        {"PATH": "/bin", "VMWARE_LAB_PASSWORD": "real", "GOVC_URL": "https://real", "GOMEMLIMIT": "1TiB"},
    )
    assert spawn.args == (
        "/opt/vcsim",
        "-load",
        "/caps/objects",
        "-l",
        "127.0.0.1:0",
        "-username",
        "twin",
        "-password",
        "pw",
    )
    # No operator setting reaches the simulator; Go's own soft limit under the hard one.
    assert spawn.env == {"PATH": "/bin", "GOMEMLIMIT": "1638MiB"}
    assert spawn.data_bytes == 2048 * 1024 * 1024
    assert isinstance(spawn.preexec, functools.partial)
    assert (spawn.preexec.func, spawn.preexec.args) == (
        resource.setrlimit,
        (resource.RLIMIT_DATA, (spawn.data_bytes, spawn.data_bytes)),
    )

    oom = stopped_reason(2, "fatal error: out of memory allocating heap arena map\n", 512)
    assert oom.startswith("the simulator ran out of memory under VMWARE_PILOT_TWIN_MEMORY_MB (512 MB)")
    other = stopped_reason(1, "", 512)
    assert other == (
        "the simulator stopped (exit 1); its memory is bounded by VMWARE_PILOT_TWIN_MEMORY_MB (512 MB): no message"
    )


def test_the_memory_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().twin_memory_mb == 2048
    monkeypatch.setenv("VMWARE_PILOT_TWIN_MEMORY_MB", "512")
    assert Settings().twin_memory_mb == 512
    monkeypatch.setenv("VMWARE_PILOT_TWIN_MEMORY_MB", "100")
    with pytest.raises(ValidationError):
        Settings()


class _Unreachable:
    """A database that cannot be reached (a fault the in-process backends cannot produce)."""

    def capture_rows(self, target: str | None = None) -> list[dict[str, object]]:
        raise DatabaseUnavailable("the database at db.example cannot be reached", hint="retry")

    capture_body = put_capture = delete_capture = capture_rows  # type: ignore[assignment]


def test_a_rehearsal_whose_captures_cannot_be_read_is_unknown_and_the_gate_goes_on(pilot_home: Path) -> None:
    steps = [Step(1, "off", "aiops", "power_off_vm", {"vm_name": "DC0_H0_VM0", "target": "lab"})]
    for mode in ("auto", "required"):
        twin = Rehearser(
            TwinSettings(mode=mode, home=pilot_home, vcsim="/bin/true", govc="/bin/true"),  # type: ignore[arg-type]
            CaptureShelf(pilot_home, _Unreachable()),  # type: ignore[arg-type]
        )
        record = asyncio.run(twin.rehearse(steps, steps, {}, lambda step, _: dict(step.params)))
        assert record is not None and (record["status"], record["verdict"]) == ("unknown", "unknown")
        assert record["reason"] == (
            "the captures cannot be read: the database at db.example cannot be reached"
        )
