"""`vmware-pilot backup FILE` and `vmware-pilot restore FILE`: the SQLite store, copied safely.

The backup is SQLite's online backup (servers may keep running); the restore goes into an empty
pilot home only, then the audit trail is verified. PostgreSQL: see docs/operations.md (pg_dump).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vmware_pilot.cli.common import EXIT_REFUSED, JsonOption, Output, fail, refuse, settings
from vmware_pilot.errors import PilotError

__all__ = ["backup", "restore"]

FileArg = Annotated[Path, typer.Argument(help="The backup file.", show_default=False)]


def backup(file: FileArg, json_output: JsonOption = False) -> None:
    """Back up the SQLite store into a new FILE (online: servers may keep running)."""
    from vmware_pilot.store.backup import backup as copy

    try:
        done = copy(settings(), file)
    except PilotError as exc:
        fail(exc, json_output)
    out = Output(json_output)
    out.result(
        {
            "source": str(done.source),
            "target": str(done.target),
            "workflows": done.workflows,
            "schema_version": done.schema_version,
        }
    )
    out.show(
        f"Backed up {done.source} to {done.target}: {done.workflows} workflow(s), schema version {done.schema_version}."
    )


def restore(file: FileArg, json_output: JsonOption = False) -> None:
    """Restore a backup FILE into an empty pilot home, then verify its audit trail."""
    from vmware_pilot.store import open_store
    from vmware_pilot.store.backup import restore as copy

    chosen = settings()
    try:
        done = copy(chosen, file)
        with open_store(chosen) as store:
            report = store.audit.verify_audit()
    except PilotError as exc:
        fail(exc, json_output)
    out = Output(json_output)
    out.show(f"Restored {done.source} into {done.target}: {done.workflows} workflow(s).")
    if not report.ok:
        refuse(
            f"the restored audit trail is BROKEN: {report.description}",
            "Keep the backup for investigation; `vmware-pilot audit export` shows the events.",
            EXIT_REFUSED,
        )
    out.result(
        {
            "source": str(done.source),
            "target": str(done.target),
            "workflows": done.workflows,
            "audit_events_verified": report.checked,
        }
    )
    out.show(f"Audit trail intact: {report.checked} event(s) in {report.workflows} workflow(s) verified.")
