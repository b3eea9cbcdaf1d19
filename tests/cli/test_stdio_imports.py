"""What a plain stdio start of the server imports: only what serving needs.

The server runs in a real subprocess through the console entry point, with an import hook that
records every import statement executed by Pilot's own modules. A real MCP client initializes,
lists the tools and calls the read tools; then the record must show that no Pilot module imported
the command-line framework (typer, rich), the HTTP server (uvicorn), YAML or jsonschema, and that
typer and YAML were not loaded at all (the SDK itself loads neither; it does load uvicorn, rich
and jsonschema, so for those only Pilot's own imports can be judged).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

FORBIDDEN = ("typer", "rich", "uvicorn", "yaml", "jsonschema", "click")

# Runs in the server process: record (importer, module) for every `import` a vmware_pilot module
# executes, then start the server exactly as the console script does.
HOOKED_SERVER = """
import atexit, builtins, json, os, sys

FORBIDDEN = set(json.loads(os.environ["FORBIDDEN"]))
seen = []
_import = builtins.__import__

def recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if level == 0 and name.split(".")[0] in FORBIDDEN and importer.startswith("vmware_pilot"):
        seen.append([importer, name])
    return _import(name, globals, locals, fromlist, level)

builtins.__import__ = recording_import

def report():
    loaded = sorted({m.split(".")[0] for m in sys.modules} & FORBIDDEN)
    with open(os.environ["IMPORT_REPORT"], "w") as fh:
        json.dump({"imported_by_pilot": seen, "loaded": loaded}, fh)

atexit.register(report)
sys.argv = ["vmware-pilot", "mcp"]
from vmware_pilot.cli.main import main
main()
"""


@pytest.mark.slow
async def test_plain_stdio_server_imports_no_cli_http_yaml_or_jsonschema(tmp_path: Path) -> None:
    report = tmp_path / "imports.json"
    env = {**os.environ, "IMPORT_REPORT": str(report), "FORBIDDEN": json.dumps(FORBIDDEN)}
    params = StdioServerParameters(command=sys.executable, args=["-c", HOOKED_SERVER], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "vmware-pilot"
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"list_workflows", "get_workflow_status"} <= tools
        listed = await session.call_tool("list_workflows", {})
        assert not listed.is_error
        missing = await session.call_tool("get_workflow_status", {"workflow_id": "wf-none"})
        assert missing.is_error  # a real answer from the store, not a crash
        assert not (await session.call_tool("get_skill_catalog", {})).is_error
    found = json.loads(report.read_text())
    assert found["imported_by_pilot"] == []
    assert "typer" not in found["loaded"] and "yaml" not in found["loaded"]


def test_the_hook_sees_a_pilot_module_importing_typer(tmp_path: Path) -> None:
    """The recorder itself works: the full command line (typer) is caught when it is used."""
    import subprocess

    report = tmp_path / "imports.json"
    script = HOOKED_SERVER.replace('["vmware-pilot", "mcp"]', '["vmware-pilot", "mcp", "--help"]')
    env = {**os.environ, "IMPORT_REPORT": str(report), "FORBIDDEN": json.dumps(FORBIDDEN)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(report.read_text())
    assert ["vmware_pilot.cli.commands", "typer"] in found["imported_by_pilot"]
    assert "typer" in found["loaded"]


# Runs in the server process: start it as the console script does and, when it exits, record
# which of the modules that only tool calls need were loaded.
REPORTING_SERVER = """
import atexit, json, os, sys

def report():
    with open(os.environ["IMPORT_REPORT"], "w") as fh:
        json.dump(sorted(sys.modules), fh)

atexit.register(report)
sys.argv = ["vmware-pilot", "mcp"]
from vmware_pilot.cli.main import main
main()
"""
# What the app (built by the first tool call) needs and serving the handshake does not.
APP_ONLY = (
    "sqlalchemy",
    "vmware_pilot.app",
    "vmware_pilot.engine",
    "vmware_pilot.store",
    "vmware_pilot.templates",
    "vmware_pilot.catalog",
    "vmware_pilot.dispatch",
)


def _app_modules(loaded: list[str]) -> list[str]:
    return [m for m in loaded if any(m == p or m.startswith(p + ".") for p in APP_ONLY)]


async def _loaded(tmp_path: Path, list_tools: bool = True, call_a_tool: bool = False) -> list[str]:
    report = tmp_path / "modules.json"
    env = {**os.environ, "IMPORT_REPORT": str(report)}
    params = StdioServerParameters(command=sys.executable, args=["-c", REPORTING_SERVER], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        if list_tools:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"create_workflow", "get_workflow_status"} <= tools
        if call_a_tool:
            assert not (await session.call_tool("list_workflows", {})).is_error
    loaded: list[str] = json.loads(report.read_text())
    return loaded


async def _serve_and_report(tmp_path: Path, call_a_tool: bool) -> list[str]:
    return _app_modules(await _loaded(tmp_path, call_a_tool=call_a_tool))


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_initialize_alone_builds_no_result_models(tmp_path: Path) -> None:
    """The typed results (a few dozen pydantic models, tens of ms to build) are first needed for
    the output schemas of tools/list: the handshake does not wait for them."""
    loaded = await _loaded(tmp_path, list_tools=False)
    assert "vmware_pilot.server" in loaded  # the server itself did start
    assert "vmware_pilot.results" not in loaded


async def test_initialize_and_tools_list_load_no_store_engine_or_templates(tmp_path: Path) -> None:
    """Until the first tool call the server holds no SQLAlchemy, engine, store, catalog or
    templates: an MCP client's start-up waits for none of them."""
    assert await _serve_and_report(tmp_path, call_a_tool=False) == []


@pytest.mark.slow
async def test_the_first_tool_call_loads_the_store_and_engine(tmp_path: Path) -> None:
    """The report itself works: once a tool is called, the app's modules are there."""
    loaded = await _serve_and_report(tmp_path, call_a_tool=True)
    assert "sqlalchemy" in loaded and "vmware_pilot.engine" in loaded and "vmware_pilot.store" in loaded
