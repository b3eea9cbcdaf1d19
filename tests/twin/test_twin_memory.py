"""The twin's simulator on the lab's vcsim: it runs under VMWARE_PILOT_TWIN_MEMORY_MB (its limits
as /proc says them), a rehearsal loads a capture kept in the database (unpacked into a temporary
folder, removed after), and a simulator that runs out of memory, or stops, makes the rehearsal
`unknown` with a reason naming the limit."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

import pytest
from typer.testing import CliRunner

from tests.support.backends import Database
from vmware_pilot.cli.main import app
from vmware_pilot.config import Settings
from vmware_pilot.domain.model import Step
from vmware_pilot.store.sql import SqlStore, open_store
from vmware_pilot.twin.binaries import LAB_BIN
from vmware_pilot.twin.captures import Capture, digest_of
from vmware_pilot.twin.rehearse import Rehearser, TwinSettings
from vmware_pilot.twin.shelf import CaptureShelf
from vmware_pilot.twin.simulator import start_twin

pytestmark = pytest.mark.lab

VCSIM = LAB_BIN / "vcsim-twin"
GOVC = LAB_BIN / "govc-twin"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def vcenter() -> Iterator[SplitResult]:
    """vcsim's default inventory on loopback: its URL, with the account in it."""
    proc = subprocess.Popen(
        [str(VCSIM), "-l", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"GOVC_URL=(\S+)", proc.stdout.readline())
        assert found is not None
        yield urlsplit(found.group(1))
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def saved(vcenter: SplitResult, tmp_path_factory: pytest.TempPathFactory) -> Capture:
    """That inventory as `twin capture` saves one (govc object.save), in a folder."""
    folder = tmp_path_factory.mktemp("saved")
    env = {**os.environ, "GOVC_URL": vcenter.geturl(), "GOVC_INSECURE": "1"}
    subprocess.run(
        [str(GOVC), "object.save", "-d", str(folder / "objects")],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    digest, count = digest_of(folder / "objects")
    return Capture(
        "lab-20260102T000000Z", "lab", "vc:443", "2026-01-02T00:00:00Z", count, digest, str(folder)
    )


@pytest.fixture
def store(database: Database, pilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlStore]:
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    with open_store(Settings(home=pilot_home, database_url=database.raw_url)) as opened:
        yield opened


@pytest.mark.backends("sqlite")
async def test_the_simulator_runs_under_its_memory_limit_and_a_stop_names_it(saved: Capture) -> None:
    twin = await start_twin(saved, vcsim=str(VCSIM), govc=str(GOVC), memory_mb=300)
    try:
        pid = twin.proc.pid
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        data = next(line for line in limits if line.startswith("Max data size"))
        assert data.split()[3:6] == [str(300 * MIB), str(300 * MIB), "bytes"], data
        assert b"GOMEMLIMIT=240MiB" in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        await twin.govc("vm.power", "-off", "-force", "DC0_H0_VM0")  # it works under the limit
        assert twin.stopped() == ""
        os.kill(pid, signal.SIGKILL)  # a simulator gone mid-rehearsal (the kernel's OOM killer, say)
        await twin.proc.wait()
        assert twin.stopped().startswith("the simulator stopped (exit -9); its memory is bounded by ")
        assert "VMWARE_PILOT_TWIN_MEMORY_MB (300 MB)" in twin.stopped()
    finally:
        await twin.stop()


async def test_a_rehearsal_loads_a_capture_from_the_database_and_out_of_memory_is_unknown(
    store: SqlStore, saved: Capture, pilot_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    shelf = CaptureShelf(pilot_home, store.captures)
    shelf.keep(saved)
    # A step the twin does not run: the twin starts on the unpacked capture, the gate's state is
    # put on it with govc, its objects are saved before and after, and nothing changed.
    steps = [Step(1, "restart", "other", "restart_service", {"service": "web", "target": "lab"})]
    settings = TwinSettings(mode="required", home=pilot_home, vcsim=str(VCSIM), govc=str(GOVC))
    read = {"kind": "vm", "name": "DC0_H0_VM0", "read": "ok", "power_state": "poweredOff"}
    record = await Rehearser(settings, shelf).rehearse(
        steps, steps, {"targets": [read]}, lambda step, _: dict(step.params)
    )
    assert record is not None and record["status"] == "rehearsed", record
    assert record["capture"]["id"] == saved.id and record["capture"]["digest"] == saved.digest
    assert record["overlay"] == ["DC0_H0_VM0 poweredOff"] and record["diff"] == []
    assert [(s["step"], s["outcome"]) for s in record["steps"]] == [(1, "unknown")]
    assert (
        record["steps"][0]["answer"]
        == "other is not one of the skills a twin starts (monitor, aiops, storage)"
    )
    assert list(scratch.iterdir()) == []  # the unpacked capture and the twin's HOME are gone

    # 32 MiB is too little for Go's runtime: the simulator dies of it, and the gate is told so.
    small = TwinSettings(mode="required", home=pilot_home, vcsim=str(VCSIM), govc=str(GOVC), memory_mb=32)
    starved = await Rehearser(small, shelf).rehearse(steps, steps, {}, lambda step, _: dict(step.params))
    assert starved is not None and (starved["status"], starved["verdict"]) == ("unknown", "unknown")
    assert "the simulator ran out of memory under VMWARE_PILOT_TWIN_MEMORY_MB (32 MB)" in starved["reason"]
    assert list(scratch.iterdir()) == []


def test_twin_capture_keeps_the_capture_in_the_database(
    store: SqlStore,
    database: Database,
    vcenter: SplitResult,
    saved: Capture,
    pilot_home: Path,
    _isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monitor = _isolated_home / ".vmware-monitor"
    monitor.mkdir()
    (monitor / "config.yaml").write_text(
        f"targets:\n  - name: lab\n    host: {vcenter.hostname}\n    port: {vcenter.port}\n"
        f"    username: {vcenter.username}\n    verify_ssl: false\n"
    )
    monkeypatch.setenv("VMWARE_LAB_PASSWORD", str(vcenter.password))
    monkeypatch.setenv("VMWARE_PILOT_TWIN_GOVC", str(GOVC))
    made = CliRunner().invoke(app, ["twin", "capture", "lab", "--json"])
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout)
    assert "objects saved" in made.stderr  # progress while capturing
    assert (record["target"], record["objects"]) == ("lab", saved.objects)
    assert record["vcenter"] == f"{vcenter.hostname}:{vcenter.port}"
    assert not (pilot_home / "twins").exists()  # kept in the database, not the Pilot home
    (row,) = store.captures.capture_rows()
    assert {k: row[k] for k in record} == record and row["size"] > 0
    assert str(vcenter.password).encode() not in database.stored_bytes()
    # What was stored is what govc saved: unpacked, the same files (the same digest as a save
    # of the same inventory a moment before, but for the objects that time moves).
    shelf = CaptureShelf(pilot_home, store.captures)
    unpacked = shelf.materialise(shelf.list()[0], pilot_home / "unpacked")
    assert sorted(p.name for p in unpacked.objects_dir.iterdir()) == sorted(
        p.name for p in saved.objects_dir.iterdir()
    )
