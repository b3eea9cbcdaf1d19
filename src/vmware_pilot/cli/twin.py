"""`vmware-pilot twin capture|list|remove`: captures of a vCenter for rehearsals on a twin, kept
in the Pilot home, or in the database when VMWARE_PILOT_DATABASE_URL is set (twin/shelf.py)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from vmware_pilot.cli import common
from vmware_pilot.cli.style import group
from vmware_pilot.cli.terminal import console as terminal_console
from vmware_pilot.cli.terminal import say, visible
from vmware_pilot.errors import PilotError
from vmware_pilot.twin.captures import Capture, account_for
from vmware_pilot.twin.shelf import CaptureShelf

__all__ = ["app"]

app = group("Capture a vCenter's inventory for rehearsals on a twin; list and remove captures.")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@contextlib.contextmanager
def _shelf(json_mode: bool) -> Iterator[CaptureShelf]:
    """Where captures are kept for these settings: the Pilot home, or the database's rows."""
    settings = common.settings()
    if not settings.database_url:
        yield CaptureShelf(settings.home_path)
        return
    from vmware_pilot.store import open_store

    try:
        store = open_store(settings)
    except PilotError as exc:
        common.fail(exc, json_mode)
    try:
        yield CaptureShelf(settings.home_path, store.captures)
    finally:
        store.close()


def _age(c: Capture) -> str:
    hours = c.age_seconds() / 3600
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"


@app.command("capture")
def capture_command(
    target: Annotated[
        str, typer.Argument(help="The target name the skills use (~/.vmware-monitor/config.yaml).")
    ],
    json_mode: JsonOption = False,
) -> None:
    """Record TARGET's inventory (every managed object, in the format govmomi's simulator loads)
    with the monitor skill's account for it, or VMWARE_PILOT_TWIN_USERNAME / _PASSWORD."""
    settings = common.settings()
    try:
        account = account_for(
            target,
            Path.home(),
            os.environ,
            settings.twin_username,
            settings.twin_password.get_secret_value(),
        )
        say(f"capturing {account.vcenter} (target {target}) as {account.username or '(no user)'}…", err=True)
        shown = [0.0]

        def progress(saved: int) -> None:
            now = time.monotonic()
            if now - shown[0] >= 1.0 or saved % 500 == 0:
                shown[0] = now
                say(f"  {saved} objects saved", err=True)

        with _shelf(json_mode) as shelf:
            made = shelf.take(target, account, govc=settings.twin_govc, progress=progress)
            where = " in the database" if shelf.rows is not None else ""
    except PilotError as exc:
        common.fail(exc, json_mode)
    if json_mode:
        print(json.dumps(made.public()))
        return
    say(f"captured {made.objects} objects of {made.vcenter} as {made.id} ({made.digest[:19]}…){where}")


@app.command("list")
def list_command(json_mode: JsonOption = False) -> None:
    """The captures kept in the Pilot home (or the database), newest first, with their age."""
    settings = common.settings()
    with _shelf(json_mode) as shelf:
        try:
            found = shelf.list()
        except PilotError as exc:
            common.fail(exc, json_mode)
        where = shelf.where
    if json_mode:
        print(json.dumps([{**c.public(), "age_hours": round(c.age_seconds() / 3600, 2)} for c in found]))
        return
    if not found:
        say(f"no captures in {where} (vmware-pilot twin capture TARGET)")
        return
    stale = settings.twin_max_age * 3600
    table = Table(
        "id", "target", "vCenter", "taken", "age", "objects", "digest", title=f"Captures in {where}"
    )
    for c in found:
        age = Text(_age(c) + (" (stale)" if c.age_seconds() > stale else ""))
        table.add_row(
            Text(visible(c.id)),
            Text(visible(c.target)),
            Text(visible(c.vcenter)),
            Text(c.at),
            age,
            Text(str(c.objects)),
            Text(c.digest[:19] + "…"),
        )
    terminal_console().print(table)


@app.command("remove")
def remove_command(
    capture_id: Annotated[str, typer.Argument(help="The capture's id (twin list).")],
    json_mode: JsonOption = False,
) -> None:
    """Remove a capture from the Pilot home (or the database)."""
    with _shelf(json_mode) as shelf:
        try:
            gone = shelf.remove(capture_id)
        except PilotError as exc:
            common.fail(exc, json_mode)
    if json_mode:
        print(json.dumps({"removed": gone.public()}))
        return
    say(f"removed capture {gone.id}")
