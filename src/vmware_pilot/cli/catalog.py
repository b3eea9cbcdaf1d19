"""`vmware-pilot catalog refresh|show`: discover installed skills' tools and show the catalog."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from vmware_pilot.catalog.registry import Catalog, ToolInfo
from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.cli import common
from vmware_pilot.cli.common import EXIT_USAGE, refuse
from vmware_pilot.cli.style import group
from vmware_pilot.cli.terminal import console as terminal_console
from vmware_pilot.cli.terminal import json_text, say, visible
from vmware_pilot.dispatch.discovery import DEFAULT_TIMEOUT, SKILLS, ProbeResult, refresh_catalog
from vmware_pilot.dispatch.locate import package_name
from vmware_pilot.errors import PilotError

if TYPE_CHECKING:
    from vmware_pilot.config import Settings
    from vmware_pilot.store import SqlStore

__all__ = ["app"]

app = group("Discover the tools of installed skills and show the skill catalog.")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _progress(result: ProbeResult) -> None:
    if result.status == "discovered":
        line = f"{result.skill}: {len(result.tools)} tool(s) from {result.command} {result.version}"
    elif result.status == "not_installed":
        line = f"{result.skill}: not installed"
    else:
        line = f"{result.skill}: FAILED: {result.error}"
        if result.kept_from:
            line += f" (kept the tools found at {result.kept_from})"
    say(f"  {line}", err=True)


def _cells(*values: object) -> list[Text]:
    # A skill's own texts (descriptions, errors) are shown literally: no markup, no escapes.
    return [Text(visible(v)) for v in values]


def _refresh_table(results: tuple[ProbeResult, ...]) -> Table:
    table = Table("Skill", "Tools", "Result", title="Skill discovery")
    table.add_column("Server", overflow="fold")
    for r in results:
        if r.status == "discovered":
            outcome = f"ok, version {r.version}"
        elif r.status == "not_installed":
            outcome = "not installed"
        else:
            outcome = f"failed: {r.error}" + (f" (kept tools of {r.kept_from})" if r.kept_from else "")
        table.add_row(*_cells(r.skill, str(len(r.tools)) if r.tools else "-", outcome, r.command or "-"))
    return table


@app.command()
def refresh(
    as_json: JsonOption = False,
    skill: Annotated[
        list[str] | None, typer.Option("--skill", "-s", help="Probe only this skill (repeatable).")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.1, help="Seconds each server gets to start and list its tools."),
    ] = DEFAULT_TIMEOUT,
) -> None:
    """Start each installed vmware-<skill>-mcp, list its tools and store them in the pilot home.

    Exit 0 when every installed skill answered (skills that are not installed are only reported),
    1 when a server failed; the cache is written either way.
    """
    from vmware_pilot.app import catalog_cache

    settings = common.settings()
    skills = list(skill) if skill else list(SKILLS)
    cache = settings.catalog_cache_path
    with _shared_store(settings) as store:
        shared = catalog_cache(settings, store)
        try:
            if shared is None:
                # Find out now, not after probing every server, that the cache cannot be written.
                cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                if not os.access(cache.parent, os.W_OK):
                    raise PermissionError(f"{cache.parent} is not writable")
            say(f"Probing {len(skills)} skill(s)…", err=True)
            report = asyncio.run(
                refresh_catalog(
                    settings, skills=skills, server_timeout=timeout, on_result=_progress, cache_store=shared
                )
            )
        except PilotError as exc:
            refuse(f"cannot write the catalog cache in the database: {exc.message}", exc.hint, EXIT_USAGE)
        except OSError as exc:
            refuse(
                f"cannot write the catalog cache {cache}: {exc}",
                "point VMWARE_PILOT_HOME at a folder you can write, or fix its permissions; "
                "the previous cache (if any) is unchanged.",
                EXIT_USAGE,
            )
    if as_json:
        typer.echo(json_text(report.payload()))
    else:
        console = terminal_console()
        console.print(_refresh_table(report.results))
        found = sum(1 for r in report.results if r.status == "discovered")
        console.print(f"{found} skill(s) discovered; catalog cache: {report.cache_path}")
        missing = [r for r in report.results if r.status == "not_installed"]
        if missing:
            console.print(
                f"Not installed: {', '.join(r.skill for r in missing)}. Each is installed from PyPI "
                f"(e.g. `uv tool install {package_name(missing[0].skill)}`) "
                "or mapped to a command with VMWARE_PILOT_SKILL_COMMANDS; `--json` gives each one's hint.",
                highlight=False,
            )
    if report.failed:
        raise typer.Exit(1)


@contextlib.contextmanager
def _shared_store(settings: Settings) -> Iterator[SqlStore | None]:
    """The process's one store when VMWARE_PILOT_DATABASE_URL is set (refused when it cannot be
    opened; closed after the command); None: the files of the pilot home."""
    from vmware_pilot.app import shared_store

    try:
        store = shared_store(settings)
    except PilotError as exc:
        refuse(exc.message, exc.hint, EXIT_USAGE)
    try:
        yield store
    finally:
        if store is not None:
            store.close()


def _tool_view(catalog: Catalog, info: ToolInfo, *, full: bool) -> dict[str, Any]:
    view: dict[str, Any] = {
        "name": info.name,
        "risk": info.risk,
        "source": info.source,
        "on_server": catalog.has_tool(info.skill, info.name),
        "description": info.description,
    }
    if full:
        view["inputSchema"] = info.input_schema
        view["annotations"] = info.annotations
    return view


def _skill_view(catalog: Catalog, skill: str, *, full: bool) -> dict[str, Any]:
    found = catalog.discovered.get(skill)
    view: dict[str, Any] = {
        "skill": skill,
        "description": catalog.description(skill),
        "discovered": found is not None,
        "server": found.server if found else None,
        "version": found.version if found else None,
        "refreshed_at": (found.refreshed_at or None) if found else None,
    }
    view["tools"] = [_tool_view(catalog, info, full=full) for info in catalog.tools_of(skill)]
    return view


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "NO")


@app.command()
def show(
    skill: Annotated[
        str | None, typer.Argument(help="One skill (e.g. aiops); all skills when omitted.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show the catalog: curated entries plus tools found by `catalog refresh`, each with its risk."""
    from vmware_pilot.app import catalog_texts, read_catalog

    settings = common.settings()
    with _shared_store(settings) as store:
        cache = catalog_texts(settings, store)
        try:
            catalog = read_catalog(cache)
        except PilotError as exc:
            refuse(exc.message, exc.hint, EXIT_USAGE)
    console = terminal_console()
    if skill is None:
        views = [_skill_view(catalog, s, full=as_json) for s in catalog.skills()]
        if as_json:
            payload = {
                "cache": "database" if cache.in_database else cache.where,
                "refreshed_at": catalog.refreshed_at or None,
            }
            typer.echo(json_text({**payload, "skills": views}))
            return
        table = Table("Skill", "Tools", "Discovered", "Description", title="Skill catalog")
        for v in views:
            table.add_row(*_cells(v["skill"], str(len(v["tools"])), v["version"] or "-", v["description"]))
        console.print(table)
        if catalog.discovered:
            console.print(f"Discovered tools from {cache.where} ({catalog.refreshed_at}).")
        else:
            console.print(
                "Only curated entries: run `vmware-pilot catalog refresh` to add installed skills' tools."
            )
        return
    if not catalog.has_skill(skill):
        refuse(f"unknown skill '{skill}'", f"known skills: {', '.join(catalog.skills())}", EXIT_USAGE)
    view = _skill_view(catalog, skill_key(skill), full=as_json)
    if as_json:
        typer.echo(json_text(view))
        return
    title = Text(visible(f"{view['skill']}: {view['description']}"))
    table = Table("Tool", "Risk", "Source", "On server", "Description", title=title)
    for t in view["tools"]:
        table.add_row(*_cells(t["name"], t["risk"], t["source"], _yes_no(t["on_server"]), t["description"]))
    console.print(table)
    if view["discovered"]:
        console.print(
            Text(visible(f"Discovered from {view['server']} {view['version']} at {view['refreshed_at']}."))
        )
    else:
        console.print(
            "Curated entries only: run `vmware-pilot catalog refresh` to list the installed server's tools."
        )
