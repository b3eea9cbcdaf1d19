"""A damaged database is refused at start-up with one line and a hint, never a traceback.

Run through the installed ``vmware-pilot`` entry point, as a person or an MCP client starts it
(slow tier); the command line's refusal also in-process (fast tier).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.cli import Runner
from tests.support.stdio_server import serve
from tests.support.store_helpers import set_schema_version
from vmware_pilot.config import Settings
from vmware_pilot.store.migrations import LATEST
from vmware_pilot.store.sql import open_store

PILOT = Path(sys.executable).with_name("vmware-pilot")


@pytest.mark.parametrize("command", [pytest.param(["workflows"], id="workflows")])
def test_a_non_numeric_schema_version_is_a_clear_refusal_not_a_traceback(
    settings: Settings, command: list[str], run_pilot: Runner
) -> None:
    open_store(settings).close()
    set_schema_version(settings, str(LATEST + 1))
    too_new = run_pilot("vmware-pilot", *command)
    set_schema_version(settings, "three")
    bad = run_pilot("vmware-pilot", *command)

    assert "Traceback" not in bad.stderr, bad.stderr
    assert bad.stdout == ""
    # Refused like any other unusable database (the same exit code as a too-new schema).
    assert bad.returncode == too_new.returncode != 0
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, bad.stderr  # the refusal and its hint
    assert "schema version 'three'" in lines[0] and "not a number" in lines[0]
    assert "VMWARE_PILOT_DATABASE_URL" in lines[1]


@pytest.mark.slow  # a server process
async def test_the_stdio_server_refuses_tool_calls_on_a_bad_schema_version_and_keeps_serving(
    settings: Settings,
) -> None:
    # The stdio server opens the store at the first tool call (start-up waits for none of it), so
    # the refusal is that call's answer: one message and a hint, no traceback, and it still serves.
    open_store(settings).close()
    set_schema_version(settings, "three")
    async with serve(str(PILOT), ["mcp"], settings.home_path) as (client, _name, _version):
        for _ in range(2):
            result = await client.session.call_tool("list_workflows", {})
            assert result.is_error
            text = result.content[0].text  # type: ignore[union-attr]
            assert "Traceback" not in text
            payload = json.loads(text)
            assert "schema version 'three'" in payload["error"] and "not a number" in payload["error"]
            assert "VMWARE_PILOT_DATABASE_URL" in payload["hint"]
        assert len((await client.session.list_tools()).tools) == 13
