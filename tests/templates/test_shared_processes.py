"""Two `vmware-pilot mcp` processes with separate pilot homes (two hosts) on one database: a template
saved through one, a template imported and a catalog refreshed with the command line on a third
home, are all seen through the other."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import FAKE_SERVERS
from tests.support.backends import Database
from vmware_pilot.transports.client import connect_stdio, server_command

SCRIPT = Path(sys.executable).with_name("vmware-pilot")
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
STOP = {"action": "stop", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "web-01"}}
IMPORTED = """\
name: imported_check
description: Look at one VM
steps:
  - {action: check, skill: monitor, tool: get_vm_info, params: {vm_name: web-01}}
"""


@pytest.mark.slow
async def test_templates_and_catalog_reach_a_pilot_on_another_host(
    database: Database, tmp_path: Path
) -> None:
    def host(name: str) -> dict[str, str]:
        return {
            "VMWARE_PILOT_HOME": str(tmp_path / name / ".vmware"),
            "VMWARE_PILOT_DATABASE_URL": database.raw_url,
        }

    command, args = server_command()
    with (tmp_path / "pilots.log").open("w") as log:
        async with (
            connect_stdio(command, args, env=host("one"), errlog=log) as one,
            connect_stdio(command, args, env=host("two"), errlog=log) as two,
        ):
            saved = await one.call(
                "create_workflow",
                {"name": "ops_stop", "description": "d", "steps": [GATE, STOP], "save_as_template": True},
            )
            assert not saved.is_error, saved.payload
            made = await two.call(
                "create_workflow_from_template", {"workflow_type": "ops_stop", "params": {}}
            )
            assert not made.is_error, made.payload

            folder = tmp_path / "given"
            folder.mkdir()
            (folder / "check.yaml").write_text(IMPORTED)
            fake = shlex.join([sys.executable, str(FAKE_SERVERS / "paged_server.py")])
            env = {**os.environ, **host("three"), "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"vks": fake})}
            for cli_args in (["templates", "import", str(folder)], ["catalog", "refresh", "--skill", "vks"]):
                done = subprocess.run(
                    [str(SCRIPT), *cli_args],
                    check=False,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, done.stderr

            listed = await two.call("list_workflows", {})
            custom = {t["name"] for t in listed.payload["templates"] if t["type"] == "custom"}
            assert custom == {"ops_stop", "imported_check"}
            catalog = await one.call("get_skill_catalog", {})
            assert "tool_3" in catalog.payload["vks"]["tools"]
    for name in ("one", "two", "three"):
        home = tmp_path / name / ".vmware"
        assert not (home / "workflows").exists() and not (home / "catalog.json").exists()
