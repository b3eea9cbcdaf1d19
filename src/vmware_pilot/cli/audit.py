"""`vmware-pilot audit verify|export`: check and export the tamper-evident audit trail."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from vmware_pilot.cli.terminal import json_text, say
from vmware_pilot.config import Settings, settings_problem
from vmware_pilot.errors import PilotError, WorkflowNotFound
from vmware_pilot.store.sql import open_store

__all__ = ["ExportFormat", "app"]

app = typer.Typer(help="Verify or export the audit trail.", no_args_is_help=True)

WorkflowOption = Annotated[
    str | None, typer.Option("--workflow", "-w", help="Only this workflow id (default: every workflow).")
]


class ExportFormat(StrEnum):
    JSONL = "jsonl"


def _settings() -> Settings:
    try:
        return Settings()
    except ValueError as exc:  # pydantic's ValidationError, or SettingsError for unparsable JSON
        say(f"error: invalid settings: {settings_problem(exc)}", err=True)
        say("hint: fix the VMWARE_PILOT_* environment variables (README, Settings).", err=True)
        raise typer.Exit(2) from None


def _fail(exc: PilotError) -> typer.Exit:
    say(f"error: {exc.message}", err=True)
    hint = exc.hint
    if isinstance(exc, WorkflowNotFound):
        hint = "Check the id; `vmware-pilot audit export` shows the workflow id of every event."
    if hint:
        say(f"hint: {hint}", err=True)
    return typer.Exit(2)


@app.command()
def verify(workflow: WorkflowOption = None) -> None:
    """Check every audit event's hash chain. Exit 0 when intact, 1 naming the first bad event."""
    settings = _settings()
    try:
        with open_store(settings) as store:
            report = store.verify_audit(workflow)
    except PilotError as exc:
        raise _fail(exc) from exc
    scope = f"workflow {workflow}" if workflow else f"{report.workflows} workflow(s)"
    if report.ok:
        say(f"Audit trail intact: {report.checked} event(s) in {scope} verified.")
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
    settings = _settings()
    try:
        with open_store(settings) as store:
            for record in store.audit_events(workflow):
                typer.echo(json_text(record.to_dict(), indent=None))
    except PilotError as exc:
        raise _fail(exc) from exc
