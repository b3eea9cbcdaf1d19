"""`vmware-pilot mcp` on stdio without the command-line framework: settings, logging, serve.

The stdio server is started by an MCP client for every session, so its start-up is on the
client's clock: this module imports neither typer nor rich, and ``cli.main`` routes the plain
forms of the command here (see ``stdio_args``). Refusals print a message and a hint on stderr
and return the exit code (``cli.refusals``); stdout carries only the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vmware_pilot.cli.logs import configure_logging
from vmware_pilot.cli.refusals import SETTINGS_HINT, exit_code, report
from vmware_pilot.cli.refusals import load_settings as _load
from vmware_pilot.errors import PilotError, StartupRefused

if TYPE_CHECKING:
    from vmware_pilot.config import Settings
    from vmware_pilot.domain.actor import Actor
    from vmware_pilot.ondemand import AppOnDemand
    from vmware_pilot.store import SqlStore

__all__ = ["configure_logging", "load_settings", "refresh_catalog_if_stale", "serve", "stdio_args"]


def stdio_args(args: Sequence[str]) -> bool | None:
    """``--dispatch`` for the arguments of a plain stdio start, or None for anything else.

    Plain means only ``--transport stdio`` (any case, ``=`` form too) and ``--dispatch``: every
    other form (help, network options, mistakes) goes to the full command line, which owns the
    help text and the refusals."""
    dispatch = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--dispatch":
            dispatch = True
        elif arg.startswith("--transport="):
            if arg.partition("=")[2].strip().lower() != "stdio":
                return None
        elif arg == "--transport" and rest and not rest[0].startswith("-"):
            if rest.pop(0).strip().lower() != "stdio":
                return None
        else:
            return None
    return dispatch


def load_settings(dispatch: bool, expose: str | None = None, allow_write: str | None = None) -> Settings:
    """Settings from the environment (``--dispatch`` forces stdio dispatch; ``--expose`` and
    ``--allow-write``, when either is given, replace the environment's exposure), logging
    configured; raises ``StartupRefused`` when they cannot be used."""
    from vmware_pilot.server.exposure import exposed_tools, resolve_exposure
    from vmware_pilot.tooltable import TOOL_NAMES

    settings = _load(dispatch, server=True)
    try:
        configure_logging(settings.log_level, settings.log_format)
    except ValueError as exc:
        raise StartupRefused(f"invalid settings: {exc}", hint=SETTINGS_HINT) from None
    chosen, writes = resolve_exposure(expose, allow_write, settings.mcp_expose, settings.mcp_allow_write)
    offered = exposed_tools(chosen, writes)
    if len(offered) < len(TOOL_NAMES):
        hidden = [n for n in TOOL_NAMES if n not in offered]
        logging.getLogger("vmware_pilot").info(
            "offering %d of %d tools (not offered: %s); this limits what clients see, roles still "
            "decide what a caller may do",
            len(offered),
            len(TOOL_NAMES),
            ", ".join(hidden),
        )
    if settings.otlp_endpoint:  # OpenTelemetry is imported only then (the optional extra `otel`)
        from vmware_pilot.adapters.otel import install

        install()
    return settings.model_copy(update={"mcp_expose": chosen.strip().lower(), "mcp_allow_write": writes})


async def _sweep(app: AppOnDemand) -> None:
    """With dispatch, continue the runs of Pilots that stopped (engine/sweeper.py). The engine is
    imported only after the first interval: the MCP handshake never waits for it."""
    await asyncio.sleep(app.settings.sweep_seconds)
    from vmware_pilot.engine.sweeper import Sweeper

    await Sweeper(lambda: app.get().service.runner, app.settings.sweep_seconds).run()


def refresh_catalog_if_stale(settings: Settings, store: Callable[[], SqlStore | None]) -> None:
    """With dispatch: bring the skill catalog up to date with the installed skills when its cache is
    missing or older than them (``app.refresh_stale_catalog``; with a database URL its row in
    ``store()``, the process's one store). Blocking: run it in a worker thread; a failure is
    logged, the catalog stays as it was."""
    from vmware_pilot.app import refresh_stale_catalog

    try:
        refresh_stale_catalog(settings, store())
    except PilotError as exc:
        logging.getLogger("vmware_pilot").warning("the skill catalog was not refreshed: %s", exc.message)
    except Exception:  # a daemon thread's failure must not pass unseen
        logging.getLogger("vmware_pilot").exception("the skill catalog was not refreshed")


async def _serve(app: AppOnDemand, actor: Actor) -> None:
    from vmware_pilot.transports.stdio import serve_stdio

    if app.dispatching and app.built is None:
        # Beside the handshake, off the event loop (it starts the skills' servers); the first tool
        # call waits for it. A daemon thread: a client that leaves early is not kept waiting (the
        # cache is replaced atomically or not at all).
        app.prepare(lambda settings: refresh_catalog_if_stale(settings, app.shared_store))
    sweeping = asyncio.create_task(_sweep(app)) if app.dispatching else None
    try:
        await serve_stdio(app, actor)
    finally:
        if sweeping is not None:
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
        await app.aclose()


def serve(settings: Settings) -> int:
    """Serve on stdin/stdout until the client closes; the exit code.

    The app (store, engine, catalog, templates) is built by the first tool call, not before
    `initialize`: a store that cannot be opened is reported in that call's answer, with its hint."""
    from vmware_pilot.domain.actor import Actor
    from vmware_pilot.ondemand import AppOnDemand

    mode = (
        "steps run in each skill's own MCP server"
        if settings.dispatch == "stdio"
        else "steps handed back to the agent"
    )
    logging.getLogger("vmware_pilot").info(
        "vmware-pilot serving MCP on stdio (home %s, %s)", settings.home_path, mode
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(AppOnDemand(settings), Actor.os_user()))
    return 0


def main(args: Sequence[str]) -> int | None:
    """Serve for a plain stdio start and return the exit code; None when ``args`` are not plain."""
    dispatch = stdio_args(args)
    if dispatch is None:
        return None
    try:
        settings = load_settings(dispatch)
    except PilotError as exc:
        report(exc.message, exc.hint, server=True)
        return exit_code(exc)
    return serve(settings)
