"""A separate Pilot process that keeps replacing the steps of drafts (run by test_confirm_race).

    draft_worker.py IDS_FILE READY_FILE   create READY_FILE once ready, then switch each draft in
                                          IDS_FILE between an ungated and a gated delete until none
                                          is a draft any more or READY_FILE is gone; print the
                                          number of updates

The app comes from Settings() (VMWARE_PILOT_HOME inherited from the test).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import UpdateDraftRequest
from vmware_pilot.errors import PilotError

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
DELETE = {"action": "rm", "skill": "aiops", "tool": "delete_vm", "params": {"vm_name": "x", "confirm": True}}


def main(ids_file: str, ready_file: str) -> None:
    ids = Path(ids_file).read_text().split()
    app = build_app(Settings())
    who = Actor("mallory")
    Path(ready_file).touch()
    deadline = time.monotonic() + 60
    updates = 0
    try:
        drafts, turn = set(ids), 0
        while drafts and Path(ready_file).exists() and time.monotonic() < deadline:
            for wid in sorted(drafts):
                steps = [DELETE] if turn % 2 == 0 else [GATE, DELETE]
                try:
                    app.service.update_draft(UpdateDraftRequest(who, wid, steps=steps)).payload()
                    updates += 1
                except PilotError:
                    drafts.discard(wid)  # confirmed (no longer a draft), or a conflict: move on
            turn += 1
    finally:
        app.close()
    print(updates)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
