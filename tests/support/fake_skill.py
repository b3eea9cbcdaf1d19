"""A small MCP skill server for fault injection: what the real companions cannot be made to do.

Run as ``python fake_skill.py MODE``. Tools: ``echo`` (returns its arguments and this process's
pid), ``die`` (exits mid-call), ``hang`` (never answers), ``slow`` (sleeps ``seconds``),
``rendezvous`` (waits in a folder until ``parties`` callers are in it at once), ``preview``
(answers ``{"action": "preview"}``), ``boom`` (raises), ``noisy`` (writes to stderr, then raises
with a two-line message), ``traced`` (returns the ``_meta.traceparent`` the call carried). MODE
``nostart`` exits before the handshake.

It runs on the 2.x SDK (``MCPServer``) and answers Pilot's client as the 1.x companion skills do:
a tool that fails raises ``ToolError``, whose text reaches the caller (``Error executing tool
NAME: TEXT``), as 1.x ``FastMCP`` passes on every exception's text; 2.x would hide the text of
any other exception.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

if len(sys.argv) > 1 and sys.argv[1] == "nostart":
    sys.stderr.write("fake skill: refusing to start\n")
    sys.exit(3)

server = MCPServer("fake-skill")


@server.tool()
def echo(value: str = "", vm_name: str = "", password: str = "") -> dict[str, Any]:
    return {"value": value, "vm_name": vm_name, "password": password, "pid": os.getpid()}


@server.tool()
def die() -> dict[str, Any]:
    os._exit(9)


@server.tool()
async def hang() -> dict[str, Any]:
    import anyio

    await anyio.sleep(3600)
    return {}


@server.tool()
async def slow(seconds: float = 0.2) -> dict[str, Any]:
    import anyio

    started = time.monotonic()
    await anyio.sleep(seconds)
    return {"pid": os.getpid(), "started": started}


@server.tool()
async def rendezvous(folder: str, parties: int, wait_at_most: float = 50.0) -> dict[str, Any]:
    """Arrive in ``folder``, then wait until ``parties`` callers have arrived; ``met`` says
    whether they all did while this call was still running."""
    import anyio

    here = Path(folder)
    (here / str(os.getpid())).touch()
    deadline = time.monotonic() + wait_at_most
    while len(list(here.iterdir())) < parties:
        if time.monotonic() > deadline:
            return {"pid": os.getpid(), "met": False}
        await anyio.sleep(0.02)
    return {"pid": os.getpid(), "met": True}


@server.tool()
def preview(vm_name: str = "") -> dict[str, Any]:
    return {"action": "preview", "would": f"power off {vm_name}"}


@server.tool()
def boom() -> dict[str, Any]:
    raise ToolError("the skill failed on purpose")


@server.tool()
def noisy() -> dict[str, Any]:
    sys.stderr.write("fake skill INFO: a line for the log\nTraceback (most recent call last):\n  boom\n")
    sys.stderr.flush()
    raise ToolError("the skill failed loudly\nand said more on a second line")


@server.tool()
def traced(ctx: Context) -> dict[str, Any]:
    meta = ctx.request_context.meta
    return {"traceparent": meta.get("traceparent") if meta is not None else None}


if __name__ == "__main__":
    server.run("stdio")
