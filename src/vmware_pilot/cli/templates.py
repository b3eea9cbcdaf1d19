"""`vmware-pilot templates [import DIR | export DIR | remove NAME]`: list, and move custom templates.

Custom templates live in the templates folder on a single host, or as rows of the database when
VMWARE_PILOT_DATABASE_URL is set (so every replica sees the same). ``import`` checks each
``*.yaml``/``*.yml`` file of DIR exactly as the folder loader does and stores each usable one whole
(or not at all), reporting per file; ``export`` writes each usable template as ``<name>.yaml``,
which ``import`` takes back unchanged, into a new folder (created 0700) or an empty one (its mode
left alone). Exit 0 when every file or template was handled, 1 when one could not be, 2 when DIR
cannot be used (for ``export``: not a folder, or not empty).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from vmware_pilot.cli import operator as operator_commands
from vmware_pilot.cli.common import (
    EXIT_REFUSED,
    EXIT_USAGE,
    JsonOption,
    Output,
    fail,
    open_app,
    operator,
    refuse,
)
from vmware_pilot.cli.style import group
from vmware_pilot.cli.terminal import visible
from vmware_pilot.errors import PilotError

__all__ = ["app"]

app = group(no_args_is_help=False)

DirArg = Annotated[Path, typer.Argument(help="A folder of template files (*.yaml, *.yml).")]


@app.callback(invoke_without_command=True)
def templates(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """List the built-in and custom templates `vmware-pilot run` can start.

    `import DIR` and `export DIR` move custom templates in and out: the database's when VMWARE_PILOT_DATABASE_URL is set, else the templates folder's."""
    if ctx.invoked_subcommand is None:
        operator_commands.templates(json_output)


def _table(title: str, rows: list[dict[str, Any]], done_key: str) -> Table:
    table = Table("File", "Template", "Result", title=title)
    for row in rows:
        outcome = row.get(done_key) or f"FAILED: {row.get('error', '')}"
        table.add_row(*(Text(visible(v)) for v in (row["file"], row["name"], outcome)))
    return table


@app.command(name="import")
def import_templates(folder: DirArg, json_output: JsonOption = False) -> None:
    """Store each template file of DIR that passes the templates folder's checks.

    Each file is stored whole (added, replaced or unchanged) or, when it fails, reported and not stored at all."""
    if not folder.is_dir():
        refuse(
            f"{folder} is not a folder", "Give the folder that holds the *.yaml template files.", EXIT_USAGE
        )
    out = Output(json_output)
    with open_app() as pilot:
        try:
            rows = pilot.service.templates.import_folder(folder, operator().label)
            where = pilot.service.templates.where
        except PilotError as exc:
            fail(exc, json_output)
    failed = sum(1 for r in rows if "error" in r)
    out.result({"templates": rows, "imported": len(rows) - failed, "failed": failed, "into": where})
    if not json_output:
        out.show(_table(f"Import into {where}", rows, "outcome"))
        out.show(f"{len(rows) - failed} file(s) imported, {failed} failed.")
    if not rows and not json_output:
        out.show(f"No *.yaml or *.yml file in {folder}.")
    if failed:
        raise typer.Exit(EXIT_REFUSED)


@app.command(name="export")
def export_templates(folder: DirArg, json_output: JsonOption = False) -> None:
    """Write each usable custom template as DIR/<name>.yaml, secrets masked.

    DIR is created (mode 0700) when missing; an existing DIR must be empty, and its mode is left as it is. `templates import DIR` takes the files back unchanged; templates that cannot be used are reported, not written."""
    from vmware_pilot.templates.saving import write_into

    _export_folder(folder)
    out = Output(json_output)
    with open_app() as pilot:
        try:
            texts, broken = pilot.service.templates.export_texts()
        except PilotError as exc:
            fail(exc, json_output)
    rows: list[dict[str, Any]] = []
    for name, text in texts:
        try:
            write_into(folder, name, text)
        except OSError as exc:
            refuse(f"cannot write {folder / (name + '.yaml')}: {exc.strerror or exc}", "", EXIT_USAGE)
        rows.append({"file": f"{name}.yaml", "name": name, "written": str(folder / f"{name}.yaml")})
    rows += [{"file": b.path.name, "name": b.name, "error": b.error} for b in broken]
    out.result({"templates": rows, "exported": len(texts), "failed": len(broken)})
    if not json_output:
        out.show(_table(f"Export to {folder}", rows, "written"))
        out.show(f"{len(texts)} template(s) exported, {len(broken)} not usable (not written).")
    if broken:
        raise typer.Exit(EXIT_REFUSED)


def _export_folder(folder: Path) -> None:
    """Make ``folder`` ready for an export: created private when missing; an existing one must be
    an empty folder, and is never changed (a shared folder keeps its mode)."""
    if folder.is_symlink() or folder.exists():
        if not folder.is_dir():
            refuse(f"{folder} is not a folder", "Give a folder to write the template files into.", EXIT_USAGE)
        try:
            empty = next(folder.iterdir(), None) is None
        except OSError as exc:
            refuse(f"cannot read the folder {folder}: {exc.strerror or exc}", "", EXIT_USAGE)
        if not empty:
            refuse(
                f"{folder} is not empty; nothing was exported (give a new or empty folder)", "", EXIT_USAGE
            )
        return
    try:
        folder.mkdir(mode=0o700, parents=True)
    except OSError as exc:
        refuse(f"cannot create the folder {folder}: {exc.strerror or exc}", "", EXIT_USAGE)


@app.command(name="remove")
def remove_template(
    name: Annotated[str, typer.Argument(help="The custom template's name.")],
    json_output: JsonOption = False,
) -> None:
    """Remove a custom template (its row in the database, or its file in the templates folder)."""
    with open_app() as pilot:
        try:
            removed = pilot.service.templates.remove(name)
        except PilotError as exc:
            fail(exc, json_output)
        except OSError as exc:
            refuse(f"cannot remove the template {name!r}: {exc.strerror or exc}", "", EXIT_USAGE)
    if not removed:
        refuse(
            f"no custom template named {name!r}", "`vmware-pilot templates` lists the templates.", EXIT_USAGE
        )
    out = Output(json_output)
    out.result({"name": name, "removed": True})
    out.show(f"Template {name!r} removed.")
