"""Captures in the Pilot home, in process: the monitor skill's account (read only, password never
shown), what a capture says of its objects, `twin list` / `twin remove` through the CLI, and a
rehearsal that cannot run (an unreadable capture) answered as `unknown` with the reason."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.captures import make_capture
from vmware_pilot.cli.main import app
from vmware_pilot.domain.model import Step
from vmware_pilot.errors import PilotError
from vmware_pilot.twin.captures import account_for, inventory_facts, list_captures
from vmware_pilot.twin.rehearse import Rehearser, TwinSettings
from vmware_pilot.twin.shelf import CaptureShelf

runner = CliRunner()


def monitor_config(home: Path, body: str) -> None:
    folder = home / ".vmware-monitor"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(body)


def test_the_account_is_the_monitor_skills_and_its_password_is_never_shown(_isolated_home: Path) -> None:
    monitor_config(
        _isolated_home,
        "targets:\n  - name: lab\n    host: vc.example\n    port: 8443\n    username: ro@vsphere\n",
    )
    account = account_for("lab", _isolated_home, {"VMWARE_LAB_PASSWORD": "s3cret"})
    assert (account.host, account.port, account.username, account.password) == (
        "vc.example",
        8443,
        "ro@vsphere",
        "s3cret",
    )
    assert "s3cret" not in repr(account)
    env = account.govc_env({"PATH": "/bin", "GOVC_URL": "https://elsewhere"})
    assert env["GOVC_URL"] == "https://vc.example:8443/sdk" and env["GOVC_PASSWORD"] == "s3cret"
    # The skill's .env (b64: as the skill writes it), and Pilot's own account winning.
    (_isolated_home / ".vmware-monitor" / ".env").write_text(
        "VMWARE_LAB_PASSWORD=b64:" + base64.b64encode(b"from-env-file").decode() + "\n"
    )
    assert account_for("lab", _isolated_home, {}).password == "from-env-file"
    own = account_for("lab", _isolated_home, {}, "pilot-ro", "pilots")
    assert (own.username, own.password) == ("pilot-ro", "pilots")
    with pytest.raises(PilotError) as missing:
        account_for("other", _isolated_home, {})
    assert "not in" in missing.value.message and missing.value.hint


def test_a_capture_says_its_objects_and_the_cli_lists_and_removes_it(pilot_home: Path) -> None:
    old = make_capture(pilot_home, "lab-old", "2026-01-01T00:00:00Z")
    make_capture(pilot_home, "lab-new", "2026-01-02T00:00:00Z")
    facts = inventory_facts(old / "objects")
    assert facts["VirtualMachine:vm-57"] == {
        "type": "VirtualMachine",
        "name": "DC0_H0_VM0",
        "parent": "Folder:group-v3",
        "power_state": "poweredOn",
        "connection_state": "connected",
        "tools_status": "guestToolsNotRunning",
        "host": "host-21",
        "snapshots": ["lab-base", "second"],
    }
    assert [c.id for c in list_captures(pilot_home)] == ["lab-new", "lab-old"]
    found = CaptureShelf(pilot_home).latest("lab")
    assert found is not None and found.id == "lab-new"

    listed = runner.invoke(app, ["twin", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert (
        [r["id"] for r in rows] == ["lab-new", "lab-old"]
        and rows[0]["objects"] == 2
        and rows[0]["age_hours"] > 24
    )
    table = runner.invoke(app, ["twin", "list"], env={"COLUMNS": "200"})
    assert "lab-new" in table.stdout and "(stale)" in table.stdout
    removed = runner.invoke(app, ["twin", "remove", "lab-old"])
    assert removed.exit_code == 0 and not old.exists()
    again = runner.invoke(app, ["twin", "remove", "lab-old"])
    assert again.exit_code != 0 and "no capture 'lab-old'" in again.stderr


def test_a_rehearsal_on_an_unreadable_capture_is_unknown_with_the_reason(pilot_home: Path) -> None:
    make_capture(pilot_home, "lab-broken", "2026-01-02T00:00:00Z", readable=False)
    steps = [Step(1, "off", "aiops", "power_off_vm", {"vm_name": "DC0_H0_VM0", "target": "lab"})]
    twin = Rehearser(TwinSettings(mode="required", home=pilot_home, vcsim="/bin/true", govc="/bin/true"))
    record = asyncio.run(twin.rehearse(steps, steps, {}, lambda step, _: dict(step.params)))
    assert record is not None and record["status"] == "unknown" and record["verdict"] == "unknown"
    assert "capture lab-broken is not readable" in record["reason"]
    assert record["capture"]["id"] == "lab-broken" and record["capture"]["stale"] is True
    assert record["digest"].startswith("sha256:")
    # auto: no capture of the target, no rehearsal at all; required: unknown, saying why.
    other = [Step(1, "off", "aiops", "power_off_vm", {"vm_name": "x", "target": "prod"})]
    auto = Rehearser(TwinSettings(mode="auto", home=pilot_home, vcsim="/bin/true", govc="/bin/true"))
    assert asyncio.run(auto.rehearse(other, other, {}, lambda step, _: dict(step.params))) is None
    needed = Rehearser(TwinSettings(mode="required", home=pilot_home, vcsim="/bin/true", govc="/bin/true"))
    said = asyncio.run(needed.rehearse(other, other, {}, lambda step, _: dict(step.params)))
    assert (
        said is not None
        and said["reason"] == "no capture of target 'prod' (`vmware-pilot twin capture prod`)"
    )
