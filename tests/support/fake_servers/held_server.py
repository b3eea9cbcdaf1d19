"""A skill server (vmware-monitor's and vmware-aiops' tool names) whose reading of a VM waits until
the test lets it go: a dispatched run holds at the gate's inspection, with no step in flight.

Run as ``python held_server.py FOLDER``. ``get_vm_info`` creates ``FOLDER/reached`` and answers
once ``FOLDER/release`` exists; ``get_events``, ``list_virtual_machines`` and ``power_on_vm``
answer at once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

FOLDER = Path(sys.argv[1])
server = MCPServer("held-skill")


@server.tool()
async def get_vm_info(vm_name: str = "") -> dict[str, Any]:
    (FOLDER / "reached").touch()
    while not (FOLDER / "release").exists():
        await anyio.sleep(0.05)
    return {"name": vm_name, "power_state": "poweredOff"}


@server.tool()
def get_events() -> list[dict[str, Any]]:
    return []


@server.tool()
def list_virtual_machines() -> list[dict[str, Any]]:
    return []


@server.tool()
def power_on_vm(vm_name: str) -> dict[str, Any]:
    return {"vm_name": vm_name, "power_state": "poweredOn"}


if __name__ == "__main__":
    server.run("stdio")
