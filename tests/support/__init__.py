"""The suite's helpers, in one place: builders, fakes, servers the tests start, and the lab harness.

Test folders hold tests (and their conftest.py); anything a test imports or starts lives here.
The paths below are where a test finds this package's scripts and the suite's data."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[1]
DATA = REPO / "tests" / "data"
# scripts tests start as processes
FAKE_SKILL = SUPPORT / "fake_skill.py"  # an MCP skill server with modes (see its docstring)
FAKE_SERVERS = SUPPORT / "fake_servers"  # MCP servers that crash, hang, or page their tool list
CHAOS_SKILL = SUPPORT / "chaos_skill.py"  # an MCP server that logs every call it receives
DRAFT_WORKER = SUPPORT / "draft_worker.py"
