"""`vmware-pilot mcp`: serve the 13 tools to an MCP client over stdio (or HTTPS: cli/network.py).

Settings are read once, the app is built once, the caller is the OS user; the log goes to
stderr only, because stdout carries the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from vmware_pilot.cli.terminal import say
from vmware_pilot.config import Settings, settings_problem
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = ["configure_logging", "mcp"]

_TRANSPORTS = ("stdio", "https", "http")


def configure_logging(level: str) -> None:
    """Root logging to stderr at ``level``; refuses an unknown level name."""
    numeric = logging.getLevelName(level.strip().upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    logging.basicConfig(
        stream=sys.stderr,
        level=numeric,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


def _fail(message: str, hint: str, code: int = 2) -> typer.Exit:
    say(f"vmware-pilot mcp: {message}", err=True)
    if hint:
        say(f"  {hint}", err=True)
    return typer.Exit(code)


async def _serve(app: PilotApp, actor: Actor) -> None:
    from vmware_pilot.transports.stdio import serve_stdio

    try:
        await serve_stdio(app, actor)
    finally:
        await app.aclose()


def mcp(
    transport: Annotated[
        str,
        typer.Option(
            help="stdio (the MCP client starts this command), https, or http (loopback only, for a "
            "TLS-terminating proxy). Network transports need a token: `vmware-pilot token create`."
        ),
    ] = "stdio",
    dispatch: Annotated[
        bool,
        typer.Option(
            "--dispatch",
            help="Let Pilot run each step in that skill's own MCP server instead of handing it back.",
        ),
    ] = False,
    host: Annotated[str, typer.Option(help="https/http: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="https/http: port to listen on (0 picks a free one).")] = 8443,
    cert: Annotated[Path | None, typer.Option(help="https: PEM certificate file.")] = None,
    key: Annotated[Path | None, typer.Option(help="https: PEM private key file.")] = None,
    public_name: Annotated[
        str, typer.Option(help="https/http: comma-separated names clients use (checked in Host and Origin).")
    ] = "",
) -> None:
    """Serve the MCP tools: on stdio (configure this command in your MCP client) or over HTTPS."""
    kind = transport.strip().lower()
    if kind not in _TRANSPORTS:
        raise _fail(
            f"transport {transport!r} is not available",
            "Use --transport stdio (the default; the MCP client starts this command), https or http.",
        )
    from vmware_pilot.cli.network import http_options, serve_network

    network = http_options(kind, host, port, cert, key, public_name)
    try:
        settings = Settings()
        if dispatch:
            settings = settings.model_copy(update={"dispatch": "stdio"})
        configure_logging(settings.log_level)
    except (ValidationError, ValueError) as exc:
        raise _fail(
            f"invalid settings: {settings_problem(exc)}", "Fix the VMWARE_PILOT_* environment variables."
        ) from None
    if network is not None:
        serve_network(settings, network)
        return
    from vmware_pilot.app import build_app

    try:
        app = build_app(settings)
    except PilotError as exc:
        raise _fail(exc.message, exc.hint, code=1) from None
    mode = (
        "steps run in each skill's own MCP server"
        if settings.dispatch == "stdio"
        else "steps handed back to the agent"
    )
    logging.getLogger("vmware_pilot").info(
        "vmware-pilot serving MCP on stdio (home %s, %s)", settings.home_path, mode
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(app, Actor.os_user()))
