"""The SDK internals ``server/sdk.py`` relies on are still there (fails when an SDK release moves them)."""

from __future__ import annotations

import inspect

from mcp.server.fastmcp import FastMCP
from mcp.server.lowlevel import Server

from vmware_pilot.server.sdk import set_version


def test_fastmcp_keeps_its_low_level_server_with_run_and_initialization_options() -> None:
    server = FastMCP("probe")
    lowlevel = server._mcp_server
    assert isinstance(lowlevel, Server)
    assert list(inspect.signature(lowlevel.run).parameters)[:3] == [
        "read_stream",
        "write_stream",
        "initialization_options",
    ]
    set_version(server, "9.9.9")
    assert lowlevel.create_initialization_options().server_version == "9.9.9"
