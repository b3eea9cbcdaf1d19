"""The MCP server surface: FastMCP factory, the 13 thin tools, result framing, error translation."""

from __future__ import annotations

from vmware_pilot.server.factory import SERVER_NAME, create_server
from vmware_pilot.tooltable import TOOL_NAMES

__all__ = ["SERVER_NAME", "TOOL_NAMES", "create_server"]
