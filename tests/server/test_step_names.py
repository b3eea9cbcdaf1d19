"""Skill, tool, rollback_tool and group_id are identifiers at every door that accepts steps."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.mcp_client import GATE, READ_STEP, Client
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings
from vmware_pilot.templates.builtin import BUILTINS
from vmware_pilot.templates.registry import TemplateRegistry
from vmware_pilot.templates.steps import IDENTIFIER_KEYS, identifier_problem

FORGED = "get_vm_info\x1b[2K\r\x1b[1Adelete_vm"
BAD_NAMES = [FORGED, "get vm", "vm;rm", "", "9tool", "a" * 65, "tool\n", "t\u202eool", "ok/../x"]
UNDO = {"rollback_tool": "power_on_vm", "rollback_params": {"vm_name": "a"}}


def hostile(key: str, value: str) -> dict[str, Any]:
    step = {"action": "off", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "a"}, **UNDO}
    step[key] = value
    return step


@pytest.mark.parametrize("key", IDENTIFIER_KEYS)
async def test_create_workflow_refuses_a_name_that_is_not_an_identifier(client: Client, key: str) -> None:
    before = (await client.ok("list_workflows"))["active_workflows"]
    out = await client.refused(
        "create_workflow", name="n", description="d", steps=[GATE, hostile(key, FORGED)]
    )
    assert f"Step 1: '{key}'" in out["error"] and "is not a name" in out["error"]
    assert "\x1b" not in out["error"] and "\\x1b" in out["error"]  # quoted, never raw
    assert out["hint"]
    assert (await client.ok("list_workflows"))["active_workflows"] == before


@pytest.mark.parametrize("key", IDENTIFIER_KEYS)
async def test_update_draft_refuses_a_name_that_is_not_an_identifier(client: Client, key: str) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    out = await client.refused("update_draft", workflow_id=wf, steps=[READ_STEP, GATE, hostile(key, "x y")])
    assert f"Step 2: '{key}'" in out["error"]
    assert (await client.status(wf))["steps"] == []


async def test_a_template_placeholder_cannot_smuggle_a_name(client: Client, settings: Settings) -> None:
    folder = settings.home / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "named.yaml").write_text(
        textwrap.dedent(
            """\
            name: named
            parameters:
              tool: {type: string}
            steps:
              - {action: look, skill: monitor, tool: "{{tool}}", params: {vm_name: a}, group_id: "g-{{tool}}"}
            """
        )
    )
    ok = await client.ok(
        "create_workflow_from_template", workflow_type="named", params={"tool": "get_vm_info"}
    )
    assert ok["steps"][0]["tool"] == "get_vm_info"
    out = await client.refused(
        "create_workflow_from_template", workflow_type="named", params={"tool": FORGED}
    )
    assert "'tool'" in out["error"] and "is not a name" in out["error"]


def test_a_yaml_template_with_a_bad_name_is_listed_as_broken(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        yaml.safe_dump({"name": "bad", "steps": [hostile("rollback_tool", "undo it")]})
    )
    entries = [e.model_dump() for e in TemplateRegistry(tmp_path, Catalog.curated()).listing()]
    (bad,) = [e for e in entries if e.get("name") == "bad"]
    assert "rollback_tool" in bad["error"] and "is not a name" in bad["error"]


def test_run_steps_file_refuses_a_name_that_is_not_an_identifier(tmp_path: Path) -> None:
    path = tmp_path / "steps.yaml"
    path.write_text(yaml.safe_dump({"name": "n", "steps": [GATE, hostile("skill", "aiops mon")]}))
    result = CliRunner().invoke(cli, ["run", "--steps", str(path)], env={"LOGNAME": "olivia"})
    assert result.exit_code == 2, result.output
    assert "Step 1: 'skill'" in result.output and "is not a name" in result.output


@pytest.mark.parametrize("name", BAD_NAMES)
def test_identifier_problem_names_what_is_wrong(name: str) -> None:
    problem = identifier_problem(name)
    assert problem is not None and "is not a name" in problem and len(problem) < 300


def test_every_builtin_and_companion_name_is_an_identifier(
    tmp_path: Path, companion_tools: dict[str, Any]
) -> None:
    registry = TemplateRegistry(tmp_path, Catalog.curated())
    names: list[tuple[str, str]] = []
    for builtin in BUILTINS:
        for example in builtin.examples:
            for step in registry.create(builtin.name, example, "tester").steps:
                names += [(key, getattr(step, key)) for key in IDENTIFIER_KEYS if getattr(step, key)]
    for skill, entry in companion_tools.items():
        names.append(("skill", skill))
        names += [("tool", tool["name"]) for tool in entry["tools"]]
    assert len(names) > 100
    assert [(k, n) for k, n in names if identifier_problem(n, k) is not None] == []
