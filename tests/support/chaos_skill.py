"""An MCP skill server for the chaos test (test_chaos.py) that logs every call it starts and ends.

Run as ``python chaos_skill.py``; ``CHAOS_LOG`` names the log file, shared by every copy of this
server under every Pilot replica. Each line is one ``write`` in append mode (atomic for lines this
short): ``start TOOL KEY PID TIME`` when a call arrives, ``end TOOL KEY PID TIME`` when it
answers.
Tools: ``get_events`` (a read in the catalog) keyed by ``tag``, and ``power_on_vm`` (a write)
keyed by ``vm_name``, and ``get_alarms`` (a read, key ``-``); each takes ``seconds`` to answer. ``get_vm_info`` and
``list_virtual_machines`` answer the reads Pilot makes of a gate's targets, unlogged.
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("chaos-skill")


def _log(what: str, tool: str, key: str) -> None:
    fd = os.open(os.environ["CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{what} {tool} {key} {os.getpid()} {time.time():.3f}\n".encode())
    finally:
        os.close(fd)


async def _call(tool: str, key: str, seconds: float) -> dict[str, Any]:
    _log("start", tool, key)
    await anyio.sleep(seconds)
    _log("end", tool, key)
    return {"key": key, "pid": os.getpid()}


@server.tool()
async def get_events(tag: str, seconds: float = 0.2) -> dict[str, Any]:
    return await _call("get_events", tag, seconds)


@server.tool()
async def power_on_vm(vm_name: str, seconds: float = 0.2) -> dict[str, Any]:
    return await _call("power_on_vm", vm_name, seconds)


@server.tool()
async def get_alarms(seconds: float = 0.2) -> dict[str, Any]:
    return await _call("get_alarms", "-", seconds)


@server.tool()
def get_vm_info(vm_name: str = "") -> dict[str, Any]:
    return {"name": vm_name, "power_state": "poweredOff"}


@server.tool()
def list_virtual_machines() -> list[dict[str, Any]]:
    return []


if __name__ == "__main__":
    server.run("stdio")
