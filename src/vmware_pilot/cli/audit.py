"""`vmware-pilot audit verify|export`: check and export the tamper-evident audit trail."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from vmware_pilot.cli.common import JsonOption, Output, fail, settings
from vmware_pilot.cli.refusals import starting
from vmware_pilot.cli.style import group
from vmware_pilot.cli.terminal import json_text, say
from vmware_pilot.errors import PilotError, WorkflowNotFound
from vmware_pilot.store import SqlStore, open_store

__all__ = ["ExportFormat", "app"]

app = group("Verify or export the audit trail.")

WorkflowOption = Annotated[
    str | None, typer.Option("--workflow", "-w", help="Only this workflow id (default: every workflow).")
]


class ExportFormat(StrEnum):
    JSONL = "jsonl"


_UNKNOWN_ID = "Check the id; `vmware-pilot audit export` shows the workflow id of every event."


def _store() -> SqlStore:
    """The store the settings name; a store that cannot be opened is a start-up refusal (exit 2)."""
    chosen = settings()
    try:
        return starting(lambda: open_store(chosen))
    except PilotError as exc:
        fail(exc)


@app.command()
def verify(workflow: WorkflowOption = None, json_output: JsonOption = False) -> None:
    """Check every audit event's hash chain. Exit 0 when intact, 1 naming the first bad event."""
    try:
        with _store() as store:
            report = store.audit.verify_audit(workflow)
    except PilotError as exc:
        fail(exc, json_output, hint=_UNKNOWN_ID if isinstance(exc, WorkflowNotFound) else "")
    Output(json_output).result(
        {
            "ok": report.ok,
            "checked": report.checked,
            "workflows": report.workflows,
            "description": report.description or None,
            "broken": list(report.broken),
        }
    )
    scope = f"workflow {workflow}" if workflow else f"{report.workflows} workflow(s)"
    if report.ok:
        say(f"Audit trail intact: {report.checked} event(s) in {scope} verified.", err=json_output)
        return
    say(f"Audit trail BROKEN: {report.description}", err=True)
    if len(report.broken) > 1:
        say(f"Broken workflows ({len(report.broken)}): {', '.join(report.broken)}", err=True)
    say(
        "hint: the events were changed outside vmware-pilot; keep a copy of the database for "
        "investigation and compare with `vmware-pilot audit export`.",
        err=True,
    )
    raise typer.Exit(1)


@app.command()
def export(
    workflow: WorkflowOption = None,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="Output format: one JSON object per line.")
    ] = ExportFormat.JSONL,
) -> None:
    """Print the stored audit events, oldest first (seq, workflow_id, ts, actor, action, detail, hashes)."""
    try:
        with _store() as store:
            for record in store.audit.audit_events(workflow):
                typer.echo(json_text(record.to_dict(), indent=None))
    except PilotError as exc:
        fail(exc, hint=_UNKNOWN_ID if isinstance(exc, WorkflowNotFound) else "")
