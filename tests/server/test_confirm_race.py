"""confirm_draft racing update_draft from another Pilot process never confirms an ungated plan."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import DRAFT_WORKER
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ConfirmDraftRequest, DesignRequest, UpdateDraftRequest
from vmware_pilot.errors import PilotError
from vmware_pilot.safety import gating

WORKER = DRAFT_WORKER
DRAFTS = 100

pytestmark = pytest.mark.slow


def test_confirm_draft_racing_another_process_never_confirms_an_ungated_plan(
    settings: Settings, tmp_path: Path
) -> None:
    app = build_app(settings)
    alice = Actor("alice")
    ids = []
    for _ in range(DRAFTS):
        wid = app.service.design_workflow(DesignRequest(alice, "tidy up")).payload()["workflow_id"]
        app.service.update_draft(
            UpdateDraftRequest(
                alice,
                wid,
                steps=[{"action": "require_approval"}, {"skill": "aiops", "tool": "list_virtual_machines"}],
            )
        ).payload()
        ids.append(wid)
    (tmp_path / "ids").write_text("\n".join(ids))
    ready = tmp_path / "ready"
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path / "ids"), str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        confirmed = refused = 0
        for wid in ids:
            for _ in range(20):
                try:
                    app.service.confirm_draft(ConfirmDraftRequest(alice, wid)).payload()
                except PilotError:
                    refused += 1
                    continue
                confirmed += 1
                break
        ready.unlink()  # the worker stops
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        assert int(out) > 0, "the other process changed the drafts while they were confirmed"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    try:
        for wid in ids:
            wf = app.store.workflows.load(wid)
            if wf.state.value != "draft":
                assert not gating.gate_violations(wf, app.service.catalog), f"{wid} was confirmed ungated"
        assert confirmed > 0
    finally:
        app.close()
