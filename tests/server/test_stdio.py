"""The real entry points over stdio: `vmware-pilot mcp`, `vmware-pilot-mcp`, `python -m vmware_pilot`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mcp_client import INCIDENT
from tests.support.stdio_server import serve
from vmware_pilot import __version__

BIN = Path(sys.executable).parent
COMMANDS = {
    "vmware-pilot mcp": (str(BIN / "vmware-pilot"), ["mcp"]),
    "vmware-pilot-mcp": (str(BIN / "vmware-pilot-mcp"), []),
    "python -m vmware_pilot": (sys.executable, ["-m", "vmware_pilot"]),
}


@pytest.mark.parametrize("entry", list(COMMANDS))
@pytest.mark.slow
async def test_entry_point_serves_stdio_with_name_and_version(entry: str, pilot_home: Path) -> None:
    command, args = COMMANDS[entry]
    async with serve(command, args, pilot_home) as (client, name, version):
        assert (name, version) == ("vmware-pilot", __version__)
        tools = (await client.session.list_tools()).tools
        assert len(tools) == 13


def test_importing_the_main_module_serves_nothing(pilot_home: Path) -> None:
    # Tools that import every module (documentation, coverage, pickling) must not start a server.
    env = {**os.environ, "VMWARE_PILOT_HOME": str(pilot_home)}
    done = subprocess.run(
        [sys.executable, "-c", "import vmware_pilot.__main__ as m; print(m.main.__name__)"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "main\n", "")


@pytest.mark.slow
async def test_workflow_survives_a_server_restart(pilot_home: Path) -> None:
    command, args = COMMANDS["vmware-pilot mcp"]
    async with serve(command, args, pilot_home) as (client, _, _):
        created = await client.ok(
            "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
        )
        run = await client.ok("run_workflow", workflow_id=created["workflow_id"])
        assert run["outcome"] == "awaiting_approval"
    assert (pilot_home / "pilot.db").exists()
    async with serve(command, args, pilot_home) as (client, _, _):
        status = await client.status(created["workflow_id"])
        assert status["state"] == "awaiting_approval"
        assert status["created_by"]  # the OS user on stdio


READ_TOOLS = ["review_workflow", "get_workflow_status", "list_workflows", "get_skill_catalog"]


@pytest.mark.parametrize(
    ("args", "env"),
    [(["mcp", "--expose", "read"], {}), (["mcp"], {"VMWARE_PILOT_MCP_EXPOSE": "read"})],
    ids=["flag", "environment"],
)
@pytest.mark.slow
async def test_expose_read_offers_the_four_read_tools_over_stdio(
    args: list[str], env: dict[str, str], pilot_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    async with serve(str(BIN / "vmware-pilot"), args, pilot_home) as (client, _, _):
        listed = [t.name for t in (await client.session.list_tools()).tools]
        assert listed == READ_TOOLS
        hidden = await client.refused("create_workflow_from_template", workflow_type="x", params={})
        unknown = await client.refused("no_such_tool", workflow_type="x", params={})
        assert hidden == {**unknown, "error": "Unknown tool: create_workflow_from_template"}
        assert hidden["field"] == "name"
        assert "create_workflow" not in hidden["hint"]
        assert (await client.ok("list_workflows"))["active_workflows"] == []


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["mcp", "--expose", "write"], {}, "tool exposure 'write' is not known"),
        (["mcp", "--expose", "read", "--allow-write", "nope"], {}, "'nope', which is not a tool"),
        (["mcp"], {"VMWARE_PILOT_MCP_EXPOSE": "bogus"}, "tool exposure 'bogus' is not known"),
    ],
    ids=["flag", "allow-write", "environment"],
)
@pytest.mark.slow
def test_a_bad_exposure_stops_the_server_with_exit_2(
    args: list[str], env: dict[str, str], words: str, pilot_home: Path
) -> None:
    done = subprocess.run(
        [str(BIN / "vmware-pilot"), *args],
        env={**os.environ, "VMWARE_PILOT_HOME": str(pilot_home), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    message, hint = done.stderr.splitlines()
    assert message.startswith("vmware-pilot mcp: ") and words in message
    assert hint.strip()
