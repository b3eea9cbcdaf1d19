"""Live catalog discovery: ask each installed skill server for its tools and cache the answer.

For every family skill, the server found by ``dispatch.locate`` is started over stdio with the
MCP client, ``initialize`` and ``tools/list`` (every page) are run under one timeout, and the
server is closed. The cache (``Settings.catalog_cache_path``, mode 0600, replaced atomically)
has the companion-tools format that ``catalog.registry.Catalog.from_text`` reads::

    {"refreshed_at": "<iso>", "<skill>": {"server", "version", "refreshed_at", "tools": [
        {"name", "description", "inputSchema", "annotations"}, ...]}, ...}

When a database URL is set the same JSON is kept in the database instead (``app.DbCatalogCache``),
so a refresh on one host reaches every replica: ``refresh_catalog`` reads and writes through a
``CatalogCache``.

A skill that is not installed is left out; a server that fails keeps the entry of the previous
refresh (with its older ``refreshed_at``), if any. One failure never stops the others.

The cache also records, under ``installed``, what each skill's server command was and when its
program file last changed (``installed_skills``): a Pilot that dispatches compares that with what
is installed now (``stale_reason``, no server started) and refreshes when they differ or there is
no cache (``app.refresh_stale_catalog``), so a skill installed or upgraded is classified by its own
annotations without anyone running `vmware-pilot catalog refresh`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, PaginatedRequestParams, Tool

from vmware_pilot.catalog.curated import CURATED
from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.locate import SkillCommand, locate
from vmware_pilot.errors import DispatchRefused
from vmware_pilot.safety.redaction import redact_text

__all__ = [
    "DEFAULT_TIMEOUT",
    "SKILLS",
    "CatalogCache",
    "FileCache",
    "ProbeResult",
    "RefreshReport",
    "SkillExamination",
    "discover",
    "examine_skill",
    "installed_skills",
    "list_server_tools",
    "probe_skill",
    "read_probe",
    "refresh_catalog",
    "stale_reason",
    "write_cache",
]

_log = logging.getLogger(__name__)

# The family skills Pilot knows: the curated catalog's, in its order.
SKILLS: Final[tuple[str, ...]] = tuple(CURATED)
DEFAULT_TIMEOUT: Final = 30.0
_MAX_PAGES: Final = 100
_DETAIL_MAX: Final = 300
# The cache's own keys beside the skills' entries.
INSTALLED: Final = "installed"
_META: Final = frozenset({"refreshed_at", INSTALLED})

Status = Literal["discovered", "not_installed", "failed"]


@dataclass(frozen=True)
class ProbeResult:
    """What probing one skill found. ``error``/``hint`` are set unless it was discovered."""

    skill: str
    status: Status
    command: str = ""
    version: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    error: str = ""
    hint: str = ""
    kept_from: str = ""  # a failed skill whose previous entry (refreshed then) was kept

    def summary(self) -> dict[str, Any]:
        """JSON-ready view without the tool bodies."""
        out: dict[str, Any] = {"skill": self.skill, "status": self.status, "tools": len(self.tools)}
        for key in ("command", "version", "error", "hint", "kept_from"):
            if value := getattr(self, key):
                out[key] = redact_text(value)
        return out


class CatalogCache(Protocol):
    """Where the discovery cache is kept: ``FileCache`` (the pilot home) or the database."""

    @property
    def where(self) -> str: ...
    def read(self) -> dict[str, Any]: ...
    def write(self, data: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class FileCache:
    """The cache file ``Settings.catalog_cache_path``."""

    path: Path

    @property
    def where(self) -> str:
        return str(self.path)

    def read(self) -> dict[str, Any]:
        return _read_previous(self.path)

    def write(self, data: Mapping[str, Any]) -> None:
        write_cache(self.path, data)


@dataclass(frozen=True)
class RefreshReport:
    refreshed_at: str
    cache_path: Path | str
    results: tuple[ProbeResult, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> list[ProbeResult]:
        return [r for r in self.results if r.status == "failed"]

    def payload(self) -> dict[str, Any]:
        return {
            "cache": str(self.cache_path),
            "refreshed_at": self.refreshed_at,
            "skills": [r.summary() for r in self.results],
        }


def _tool_record(tool: Tool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description or "",
        "inputSchema": tool.input_schema,
    }
    record["annotations"] = (
        tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if tool.annotations else {}
    )
    return record


def _leaf(exc: BaseException) -> BaseException:
    """The first leaf exception: task groups wrap the real cause in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException, stage: str, server_timeout: float) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, TimeoutError):
        return f"no answer to {stage} within {server_timeout:g} s"
    closed = isinstance(leaf, MCPError) and leaf.error.code == CONNECTION_CLOSED
    if closed or isinstance(leaf, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream):
        return f"the server closed the connection during {stage}"
    lines = str(leaf).strip().splitlines()
    detail = f"{type(leaf).__name__}: {lines[0]}" if lines else type(leaf).__name__
    return f"{stage} failed ({detail[:_DETAIL_MAX]})"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:_DETAIL_MAX] if lines else ""


_T = TypeVar("_T")


class _Stage:
    """What a conversation with a skill server is doing now, for the refusal when it fails."""

    def __init__(self) -> None:
        self.now = "start"


async def _with_server(
    command: SkillCommand,
    work: Callable[[ClientSession, _Stage], Awaitable[_T]],
    *,
    server_timeout: float,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    hint: str,
) -> _T:
    """Start ``command``'s server, run ``work`` on its session within ``server_timeout``, close.

    Raises ``DispatchRefused`` naming the stage that failed (and the server's last stderr line).
    """
    params = StdioServerParameters(
        command=command.program,
        args=command.args,
        env=dict(os.environ if env is None else env),
        cwd=str(cwd or Path.home()),
    )
    stage = _Stage()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            # The timeout is inside the client context, so a hung server is shut down the SDK's
            # way (stdin closed, then its whole process group terminated), children included.
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(server_timeout):
                    return await work(session, stage)
        except Exception as exc:
            what = _describe(exc, stage.now, server_timeout)
            errlog.seek(0)
            said = _last_line(errlog.read())
            raise DispatchRefused(
                f"{command.display()}: {what}" + (f"; its last stderr line: {said}" if said else ""),
                hint=hint,
                skill=command.skill,
                command=command.display(),
            ) from exc


async def _every_tool(session: ClientSession, stage: _Stage) -> tuple[str, list[dict[str, Any]]]:
    """Handshake and list every tool, page by page: ``(server version, tool records)``."""
    stage.now = "initialize"
    init = await session.initialize()
    stage.now = "tools/list"
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(_tool_record(t) for t in page.tools)
        if not page.next_cursor or page.next_cursor == cursor:
            break
        cursor = page.next_cursor
    return init.server_info.version, tools


async def list_server_tools(
    command: SkillCommand,
    *,
    server_timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Start the server, handshake, list every tool, close: ``(server version, tool records)``.

    Raises ``DispatchRefused`` naming the stage that failed (and the server's last stderr line).
    """
    return await _with_server(
        command,
        _every_tool,
        server_timeout=server_timeout,
        env=env,
        cwd=cwd,
        hint="Run the command by hand to see why it does not start, or fix its entry in "
        "VMWARE_PILOT_SKILL_COMMANDS; a slow server may need a longer --timeout.",
    )


async def probe_skill(
    skill: str,
    *,
    overrides: Mapping[str, str] | None = None,
    server_timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    path: str | None = None,
) -> ProbeResult:
    """Locate and list one skill's tools; never raises for a missing or broken server."""
    skill = skill_key(skill) or skill
    try:
        command = locate(skill, overrides, path=path)
    except DispatchRefused as exc:
        # Only the plain "not installed" refusal names a package; a bad name or setting is a failure.
        status: Status = "not_installed" if "package" in exc.fields else "failed"
        command_line = redact_text(str(exc.fields.get("command", "")))
        return ProbeResult(skill, status, command=command_line, error=exc.message, hint=exc.hint)
    try:
        version, tools = await list_server_tools(command, server_timeout=server_timeout, env=env)
    except DispatchRefused as exc:
        return ProbeResult(skill, "failed", command=command.display(), error=exc.message, hint=exc.hint)
    return ProbeResult(skill, "discovered", command=command.display(), version=version, tools=tuple(tools))


async def discover(
    skills: Sequence[str] = SKILLS,
    *,
    overrides: Mapping[str, str] | None = None,
    server_timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    path: str | None = None,
    concurrency: int = 4,
    on_result: Callable[[ProbeResult], None] | None = None,
) -> list[ProbeResult]:
    """Probe ``skills`` (a few at a time); results in the order of ``skills``."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(skill: str) -> ProbeResult:
        async with gate:
            result = await probe_skill(
                skill, overrides=overrides, server_timeout=server_timeout, env=env, path=path
            )
        if on_result is not None:
            on_result(result)
        return result

    return list(await asyncio.gather(*(one(s) for s in skills)))


def installed_skills(
    overrides: Mapping[str, str] | None = None, *, path: str | None = None, skills: Sequence[str] = SKILLS
) -> dict[str, str]:
    """Skill → its server's command line and its program file's change time, for the skills
    ``dispatch.locate`` finds (no server is started): what a refresh would probe."""
    found: dict[str, str] = {}
    for skill in skills:
        try:
            command = locate(skill, overrides, path=path)
        except DispatchRefused:
            continue
        try:
            changed = str(Path(command.program).stat().st_mtime_ns)
        except OSError:
            changed = "?"
        found[command.skill] = f"{command.display()} @{changed}"
    return found


def stale_reason(cached: Mapping[str, Any], installed: Mapping[str, str]) -> str:
    """Why the cache ``cached`` no longer describes the ``installed`` skills ("" when it does, or
    when no skill is installed: there is nothing to learn)."""
    if not installed:
        return ""
    if not cached:
        return "there is no catalog cache yet"
    if cached.get(INSTALLED) != dict(installed):
        return "the installed skills changed since the catalog was last refreshed"
    return ""


@dataclass(frozen=True)
class SkillExamination:
    """What `vmware-pilot doctor` found of one skill: its server's version, tools, and one read."""

    version: str
    tools: int
    read_tool: str = ""
    read_error: str = ""  # empty: the read answered (or there was no read to try)


def read_probe(tools: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """A read-only tool needing no argument but the target, listing things (``limit`` 1) if any."""
    readable = [
        t
        for t in tools
        if (t.get("annotations") or {}).get("readOnlyHint") is True
        and set(t.get("inputSchema", {}).get("required") or []) <= {"target"}
    ]
    listing = [
        t
        for t in readable
        if t["name"].startswith("list_") and "limit" in t["inputSchema"].get("properties", {})
    ]
    chosen = listing or readable
    return chosen[0] if chosen else None


async def examine_skill(
    command: SkillCommand,
    *,
    target: str = "",
    server_timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> SkillExamination:
    """Start ``command``'s server, list its tools and call one read (on ``target`` when given);
    raises ``DispatchRefused`` when it does not start or list. A read that fails is reported."""
    from vmware_pilot.dispatch.judge import judge

    async def work(session: ClientSession, stage: _Stage) -> SkillExamination:
        version, tools = await _every_tool(session, stage)
        probe = read_probe(tools)
        if probe is None:
            return SkillExamination(version, len(tools))
        properties = probe["inputSchema"].get("properties", {})
        arguments: dict[str, Any] = {"limit": 1} if "limit" in properties else {}
        if target and "target" in properties:
            arguments["target"] = target
        stage.now = f"tools/call {probe['name']}"
        outcome = judge(command.skill, probe["name"], await session.call_tool(probe["name"], arguments))
        error = "" if outcome.kind == "succeeded" else redact_text(outcome.message)[:_DETAIL_MAX]
        return SkillExamination(version, len(tools), probe["name"], error)

    return await _with_server(
        command,
        work,
        server_timeout=server_timeout,
        env=env,
        cwd=None,
        hint="Run the command by hand to see why it does not start.",
    )


def _read_previous(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_cache(path: Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically with ``data`` as JSON, mode 0600 (its folder made 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1, ensure_ascii=False)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def refresh_catalog(
    settings: Settings,
    *,
    skills: Sequence[str] = SKILLS,
    server_timeout: float = DEFAULT_TIMEOUT,
    on_result: Callable[[ProbeResult], None] | None = None,
    cache_store: CatalogCache | None = None,
) -> RefreshReport:
    """Probe ``skills``, then rewrite the catalog cache with what was found (others are kept).

    ``cache_store``: where the cache is read and written (default: the file in the pilot home)."""
    store = cache_store if cache_store is not None else FileCache(settings.catalog_cache_path)
    previous = store.read()
    probed_keys = {skill_key(s) for s in skills}
    # What is installed, read before probing: a skill upgraded meanwhile makes the next start refresh.
    kept = previous.get(INSTALLED)
    installed = {
        k: v for k, v in (kept if isinstance(kept, dict) else {}).items() if skill_key(k) not in probed_keys
    }
    installed.update(installed_skills(settings.skill_commands, skills=skills))
    results = await discover(
        skills, overrides=settings.skill_commands, server_timeout=server_timeout, on_result=on_result
    )
    now = datetime.now(UTC).isoformat(timespec="seconds")
    cache: dict[str, Any] = {"refreshed_at": now, INSTALLED: dict(sorted(installed.items()))}
    for skill, entry in previous.items():
        # A partial refresh keeps what it did not probe.
        if skill not in _META and skill_key(skill) not in probed_keys and isinstance(entry, dict):
            cache[skill] = {"refreshed_at": previous.get("refreshed_at", ""), **entry}
    final: list[ProbeResult] = []
    for outcome in results:
        result = outcome
        if result.status == "discovered":
            cache[result.skill] = {
                "server": result.command,
                "version": result.version,
                "refreshed_at": now,
                "tools": list(result.tools),
            }
        elif result.status == "failed" and isinstance(old := previous.get(result.skill), dict):
            old_refreshed = str(old.get("refreshed_at") or previous.get("refreshed_at") or "")
            cache[result.skill] = {**old, "refreshed_at": old_refreshed}
            result = replace(result, kept_from=old_refreshed or "an earlier refresh")
        final.append(result)
    store.write(cache)
    _log.info("catalog cache %s: %d skill(s) discovered", store.where, len(cache) - len(_META))
    cache_path = store.path if isinstance(store, FileCache) else store.where
    return RefreshReport(now, cache_path, tuple(final))
