"""Serve the Pilot MCP server on this process's stdin/stdout (stdout is the protocol channel)."""

from __future__ import annotations

from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import create_server

__all__ = ["serve_stdio"]


async def serve_stdio(app: PilotApp, actor: Actor) -> None:
    """Serve until the client closes stdin, then let runs still going finish; the caller closes ``app``."""
    server = create_server(app, actor=actor)
    try:
        await server.run_stdio_async()
    finally:
        await app.service.drain()
