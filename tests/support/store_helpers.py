"""Helpers shared by the store and audit CLI tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from vmware_pilot.config import Settings
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.store.migrations import needed_version
from vmware_pilot.templates.steps import make_step


def raw_db(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection, as someone editing the file behind vmware-pilot's back."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    return conn


def sample_workflow(
    workflow_type: str = "demo", state: WorkflowState = WorkflowState.PENDING, **params: object
) -> Workflow:
    steps = [
        make_step(0, "check", "monitor", "get_vm_info", {"vm_name": "web-01"}),
        make_step(
            1,
            "power off",
            "aiops",
            "power_off_vm",
            {"vm_name": "web-01", "password": "hunter2"},
            rollback_tool="power_on_vm",
            rollback_params={"vm_name": "web-01", "apiToken": "tok-123"},
        ),
    ]
    return Workflow.new(workflow_type, state, steps, params=dict(params), created_by="alice")


def recorded_schema(applied: int) -> dict[str, str]:
    """The schema_meta rows of a database with ``applied`` migrations (store/migrations.py)."""
    needed = needed_version(applied)
    return {"schema_version": str(needed), **({"schema_applied": str(applied)} if applied != needed else {})}


def set_schema_version(settings: Settings, value: str) -> None:
    conn = sqlite3.connect(settings.home_path / "pilot.db", isolation_level=None)
    try:
        conn.execute("UPDATE schema_meta SET value = ?", (value,))
    finally:
        conn.close()
