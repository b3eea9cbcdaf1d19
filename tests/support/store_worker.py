"""A separate OS process that updates one workflow in a loop (run by test_reliability).

    worker.py increment WF_ID N GO_FILE   wait for GO_FILE, then N load→increment→save (retrying
                                          on conflict); print {"conflicts": c} as JSON
    worker.py forever WF_ID REPORT_FILE   increment until killed; after each commit append the
                                          committed counter to REPORT_FILE
    worker.py die-in-commit WF_ID K       increment; during the K-th save, after its UPDATE and
                                          audit INSERT but before COMMIT, SIGKILL itself
    worker.py open - GO_FILE              create ready-PID next to GO_FILE, wait for GO_FILE, then
                                          open (and migrate) the store; print {"version": N} as JSON

The store comes from Settings() (VMWARE_PILOT_HOME inherited from the test).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from vmware_pilot.config import Settings
from vmware_pilot.errors import ConcurrencyConflict
from vmware_pilot.store.migrations import current_version
from vmware_pilot.store.sql import SqlStore, open_store


def increment(store: SqlStore, workflow_id: str, label: str) -> tuple[int, int]:
    """One increment that is never lost: reload and reapply on conflict. (new value, conflicts)"""
    conflicts = 0
    while True:
        wf = store.workflows.load(workflow_id)
        value = int(wf.params["counter"]) + 1
        wf.params["counter"] = value
        wf.log("increment", f"{label} -> {value}", actor=label)
        try:
            store.workflows.save(wf)
        except ConcurrencyConflict:
            conflicts += 1
            continue
        return value, conflicts


def _wait_for(go: Path) -> None:
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)


def main(argv: list[str]) -> None:
    mode, workflow_id, arg = argv[1], argv[2], argv[3]
    label = f"pid{os.getpid()}"
    if mode == "open":
        go = Path(argv[3])
        go.with_name(f"ready-{os.getpid()}").touch()
        _wait_for(go)
        with open_store(Settings()) as opened, opened.database.engine.connect() as conn:
            print(json.dumps({"version": current_version(conn)}))
        return
    store = open_store(Settings())
    if mode == "increment":
        _wait_for(Path(argv[4]))
        total = 0
        for _ in range(int(arg)):
            total += increment(store, workflow_id, label)[1]
        print(json.dumps({"conflicts": total}))
    elif mode == "forever":
        fd = os.open(arg, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        while True:
            value, _ = increment(store, workflow_id, label)
            os.write(fd, f"{value}\n".encode())
    elif mode == "die-in-commit":
        target = int(arg)
        saves = 0

        @event.listens_for(store.database.engine, "after_cursor_execute")
        def _maybe_die(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
            nonlocal saves
            if statement.startswith("INSERT INTO audit_events"):
                saves += 1
                if saves == target:
                    os.kill(os.getpid(), signal.SIGKILL)

        while True:
            increment(store, workflow_id, label)
    store.close()


if __name__ == "__main__":
    main(sys.argv)
