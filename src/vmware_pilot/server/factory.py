"""Builds the `vmware-pilot` FastMCP server for one app and one caller."""

from __future__ import annotations

import logging
from typing import Literal, cast

from mcp.server.fastmcp import FastMCP

from vmware_pilot import __version__
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server.descriptions import INSTRUCTIONS
from vmware_pilot.server.tools import build_tools

__all__ = ["SERVER_NAME", "create_server"]

SERVER_NAME = "vmware-pilot"

_LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def create_server(app: PilotApp, *, actor: Actor) -> FastMCP:
    """A server exposing the 13 tools over ``app.service``, every call made as ``actor``.

    ``initialize`` reports name ``vmware-pilot`` and the package version.
    """
    level = app.settings.log_level.upper()
    server = FastMCP(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        tools=build_tools(app.service, actor),
        log_level=cast(_LogLevel, level if level in _LEVELS else "INFO"),
    )
    # FastMCP has no version argument; the low-level server reports this in `initialize`
    # (otherwise it reports the SDK's own version).
    server._mcp_server.version = __version__
    if level != "DEBUG":
        # One INFO line per request ("Processing request of type …") is noise in an operator log.
        logging.getLogger("mcp.server.lowlevel.server").setLevel(logging.WARNING)
    return server
