"""`vmware-pilot doctor`: check what this host needs, in one go, and say what is not well.

Checks, each a row (ok, FAIL, or info): the settings (invalid values, unknown VMWARE_PILOT_*
names); the database (reachable, schema version, migrations pending, its clock against this
host's); each family skill (found, command, version, tool count, its config file and the target
in it, one read answered; a skill not installed fails only when it is required: named in
VMWARE_PILOT_SKILL_COMMANDS or with --skill; one whose program is found but whose environment is
gone always fails); OAuth (the issuer's keys fetched; what MCP clients need of it: PKCE with
S256, fails without; how they register, for information) and the console's sign-in settings; the notify URL (answers HTTP). Exit 0 when all is well, 1 naming what is not.
Nothing is created or migrated, no secret is printed.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer

from vmware_pilot.cli.common import JsonOption
from vmware_pilot.cli.terminal import console, json_text
from vmware_pilot.config import ENV_PREFIX, Settings, settings_problem
from vmware_pilot.safety.redaction import redact_text

__all__ = ["Row", "doctor"]

Status = Literal["ok", "fail", "info"]
# The database's clock may differ from this host's by this much before leases and expiries suffer.
MAX_CLOCK_SKEW = 5.0


@dataclass(frozen=True)
class Row:
    check: str
    status: Status
    detail: str


def _settings_rows() -> tuple[list[Row], Settings | None]:
    rows: list[Row] = []
    known = set(Settings.env_names().values())
    unknown = sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and k not in known)
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(known), n=1)
        rows.append(
            Row(f"setting {name}", "fail", "unknown name" + (f"; did you mean {near[0]}?" if near else ""))
        )
    try:
        settings = Settings()
    except Exception as exc:
        rows.append(Row("settings", "fail", redact_text(settings_problem(exc))))
        return rows, None
    if not unknown:
        rows.append(Row("settings", "ok", "every VMWARE_PILOT_* value is valid"))
    return rows, settings


def _database_row(settings: Settings) -> list[Row]:
    from vmware_pilot.errors import PilotError
    from vmware_pilot.store import database_state

    where = "PostgreSQL" if settings.database_url.startswith("postgresql") else "SQLite"
    try:
        state = database_state(settings)
    except PilotError as exc:
        return [Row("database", "fail", f"{where}: {redact_text(exc.message)}")]
    if not state.exists:
        return [Row("database", "info", f"{where}: not created yet (created and migrated at first use)")]
    rows = []
    if state.needed > state.latest:
        rows.append(
            Row(
                "database",
                "fail",
                f"{where}: schema version {state.version} needs a build of schema {state.needed} or newer; "
                f"this build's is {state.latest}",
            )
        )
    else:
        pending = max(0, state.latest - state.version)
        detail = f"{where}: reachable, schema version {state.version}" + (
            f", {pending} migration(s) pending (applied when Pilot next opens it)"
            if pending
            else ", no migration pending"
        )
        rows.append(Row("database", "ok", detail))
    skew = state.clock_skew
    rows.append(
        Row(
            "clock",
            "ok" if abs(skew) <= MAX_CLOCK_SKEW else "fail",
            f"the database's clock is {skew:+.1f} s from this host's"
            + (
                ""
                if abs(skew) <= MAX_CLOCK_SKEW
                else f" (more than {MAX_CLOCK_SKEW:g} s: sync both with NTP)"
            ),
        )
    )
    return rows


def _config_problem(skill: str, target: str) -> str:
    """Why the skill's own config does not serve ``target`` (empty: it does)."""
    import yaml

    path = Path.home() / f".vmware-{skill}" / "config.yaml"
    if not path.is_file():
        return f"no config file {path}"
    if not target:
        return ""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return f"{path} cannot be read ({type(exc).__name__})"
    targets = data.get("targets") if isinstance(data, dict) else None
    names = [t.get("name") for t in targets if isinstance(t, dict)] if isinstance(targets, list) else []
    return "" if target in names else f"{path} has no target {target!r}"


async def _skill_rows(settings: Settings, required: set[str], target: str, seconds: float) -> list[Row]:
    from vmware_pilot.dispatch.discovery import SKILLS, examine_skill
    from vmware_pilot.dispatch.locate import locate
    from vmware_pilot.errors import DispatchRefused

    gate = asyncio.Semaphore(4)

    async def one(skill: str) -> Row:
        name = f"skill {skill}"
        try:
            command = locate(skill, settings.skill_commands)
        except DispatchRefused as exc:
            # A program left on PATH whose environment is gone was meant to be installed: it fails.
            if skill in required or "interpreter" in exc.fields:
                return Row(name, "fail", f"missing: {redact_text(exc.message)}. {exc.hint}")
            return Row(name, "info", "not installed")
        async with gate:
            try:
                seen = await examine_skill(command, target=target, server_timeout=seconds)
            except DispatchRefused as exc:
                return Row(name, "fail", redact_text(exc.message))
        detail = f"{command.display()}, version {seen.version or '?'}, {seen.tools} tools"
        problems = [p for p in (_config_problem(skill, target),) if p]
        if seen.read_tool and seen.read_error:
            problems.append(f"{seen.read_tool} failed: {seen.read_error}")
        elif seen.read_tool:
            detail += f", {seen.read_tool} answered" + (f" on {target}" if target else "")
        if problems:
            return Row(name, "fail", f"{detail}; " + "; ".join(problems))
        return Row(name, "ok", detail)

    from vmware_pilot.catalog.renames import skill_key

    names = list(dict.fromkeys([*SKILLS, *(skill_key(s) or s for s in required)]))
    return list(await asyncio.gather(*(one(s) for s in names)))


async def _oauth_rows(settings: Settings) -> list[Row]:
    rows = []
    if settings.oauth_issuer:
        from vmware_pilot.errors import PilotError
        from vmware_pilot.transports.jwks import IssuerKeys
        from vmware_pilot.transports.oauth import client_support

        keys = IssuerKeys(settings.oauth_issuer)
        try:
            await keys.load()
        except PilotError as exc:
            rows.append(Row("oauth", "fail", redact_text(exc.message)))
        else:
            rows.append(
                Row(
                    "oauth",
                    "ok",
                    f"{settings.oauth_issuer}: {len(keys.key_ids()) or 'unnamed'} signing key(s)",
                )
            )
            pkce, registration = client_support(keys.metadata)
            rows.append(Row("oauth pkce", "ok" if pkce[1] else "fail", pkce[2]))
            rows.append(Row("oauth registration", "info", registration[2]))
    else:
        rows.append(Row("oauth", "info", "off (static tokens only)"))
    if settings.console_oidc_client_id.strip() and not settings.oauth_issuer:
        rows.append(
            Row(
                "console",
                "fail",
                "VMWARE_PILOT_CONSOLE_OIDC_CLIENT_ID is set without VMWARE_PILOT_OAUTH_ISSUER",
            )
        )
    return rows


async def _notify_rows(settings: Settings) -> list[Row]:
    if not settings.notify_url:
        return [Row("notify", "info", "off (no VMWARE_PILOT_NOTIFY_URL)")]
    import httpx

    shown = redact_text(settings.notify_url)
    try:
        async with httpx.AsyncClient(timeout=settings.notify_timeout, follow_redirects=False) as client:
            response = await client.head(settings.notify_url)
    except httpx.HTTPError as exc:
        return [Row("notify", "fail", f"{shown} does not answer ({type(exc).__name__})")]
    secret = (
        ""
        if settings.notify_secret.get_secret_value()
        else "; VMWARE_PILOT_NOTIFY_SECRET is empty (unsigned)"
    )
    return [Row("notify", "ok", f"{shown} answers (HTTP {response.status_code}){secret}")]


def examine(required: set[str], target: str, seconds: float) -> list[Row]:
    rows, settings = _settings_rows()
    if settings is None:
        return rows
    required |= set(settings.skill_commands)

    async def network() -> list[Row]:
        skills, oauth, notify = await asyncio.gather(
            _skill_rows(settings, required, target, seconds), _oauth_rows(settings), _notify_rows(settings)
        )
        return [*skills, *oauth, *notify]

    return [*rows, *_database_row(settings), *asyncio.run(network())]


def doctor(
    json_mode: JsonOption = False,
    skill: Annotated[
        list[str] | None,
        typer.Option(
            "--skill",
            help="A skill this host must have (repeatable); those in VMWARE_PILOT_SKILL_COMMANDS must too.",
        ),
    ] = None,
    target: Annotated[
        str, typer.Option(help="The target each skill's config must name; the read runs against it.")
    ] = "",
    timeout: Annotated[float, typer.Option(help="Seconds each skill server may take.")] = 30.0,
) -> None:
    """Check what this host needs: settings, database, skills, OAuth, notify URL and clock."""
    rows = examine(set(skill or ()), target.strip(), timeout)
    failed = [r.check for r in rows if r.status == "fail"]
    if json_mode:
        sys.stdout.write(json_text({"ok": not failed, "checks": [asdict(r) for r in rows]}) + "\n")
    else:
        from rich.table import Table

        table = Table("Check", "Status", "Detail", show_lines=False)
        for row in rows:
            status = {"ok": "[green]ok[/]", "fail": "[red bold]FAIL[/]", "info": "-"}[row.status]
            table.add_row(row.check, status, row.detail)
        out = console(stderr=False)
        out.print(table)
        out.print("All is well." if not failed else f"Not well: {', '.join(failed)}.")
    if failed:
        raise typer.Exit(1)
