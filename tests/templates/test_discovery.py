"""Template discovery: each listed template shows its parameters and an example call that works."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmware_pilot.errors import TemplateError, TemplateParamError
from vmware_pilot.templates.builtin import BUILTINS
from vmware_pilot.templates.registry import TemplateRegistry

KEYS = {"name", "type", "required", "description"}

RESTART = """name: restart_web
description: Restart the web tier
parameters:
  vm_name: {type: string, required: true, description: VM to restart}
  mode: {type: string, enum: [soft, hard], default: soft, description: How to stop it}
  retries: {type: integer, default: 2}
steps:
  - {action: require_approval, skill: pilot, tool: approve, params: {message: "Restart?"}}
  - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: "{{vm_name}}", mode: "{{mode}}", retries: "{{retries}}"}}
"""


def write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_every_builtin_parameter_is_listed_with_type_requirement_and_description(
    registry: TemplateRegistry,
) -> None:
    listed = {e.name: e.model_dump() for e in registry.listing() if e.type == "builtin"}
    for template in BUILTINS:
        params = listed[template.name]["parameters"]
        assert [p["name"] for p in params] == list(template.params_model.model_fields)
        for p in params:
            assert set(p) >= KEYS and p["description"], (template.name, p)
            field = template.params_model.model_fields[p["name"]]
            assert p["required"] is field.is_required()
            assert ("default" in p) is (not field.is_required())
    incident = {p["name"]: p for p in listed["incident_response"]["parameters"]}
    assert (incident["alert_entity"]["type"], incident["alert_entity"]["required"]) == ("string", True)
    assert (incident["target"]["required"], incident["target"]["default"]) == (False, "")
    worker = {p["name"]: p for p in listed["vks_cluster_deploy"]["parameters"]}["worker_count"]
    assert (worker["type"], worker["default"]) == ("integer", 3)


@pytest.mark.parametrize("template", [b.name for b in BUILTINS])
def test_each_builtin_example_call_plans_the_template(registry: TemplateRegistry, template: str) -> None:
    example = registry.describe(template).model_dump()["example"]
    assert example["tool"] == "create_workflow_from_template"
    arguments = example["arguments"]
    assert arguments["workflow_type"] == template
    wf = registry.create(arguments["workflow_type"], arguments["params"], "tester")
    assert wf.workflow_type == template and wf.steps


def test_yaml_parameters_with_enum_are_listed_and_enforced(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(templates_dir, "restart.yaml", RESTART)
    entry = registry.describe("restart_web").model_dump()
    assert entry["parameters"] == [
        {"name": "vm_name", "type": "string", "required": True, "description": "VM to restart"},
        {
            "name": "mode",
            "type": "string",
            "required": False,
            "description": "How to stop it",
            "default": "soft",
            "enum": ["soft", "hard"],
        },
        {"name": "retries", "type": "integer", "required": False, "description": "", "default": 2},
    ]
    arguments = entry["example"]["arguments"]
    assert arguments == {"workflow_type": "restart_web", "params": {"vm_name": "<vm_name>"}}
    wf = registry.create("restart_web", arguments["params"], "tester")
    assert wf.steps[1].params == {"vm_name": "<vm_name>", "mode": "soft", "retries": 2}
    with pytest.raises(TemplateParamError) as refused:
        registry.create("restart_web", {"vm_name": "web-01", "mode": "brutal"}, "tester")
    assert "one of 'soft', 'hard'" in refused.value.message
    assert "mode (string, default 'soft', one of 'soft', 'hard')" in refused.value.hint


def test_a_yaml_enum_that_does_not_fit_its_type_or_default_makes_the_file_broken(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(templates_dir, "a.yaml", RESTART.replace("enum: [soft, hard]", "enum: [1, 2]"))
    write(
        templates_dir,
        "b.yaml",
        RESTART.replace("restart_web", "other").replace("default: soft", "default: x"),
    )
    broken = {e.file: e.error for e in registry.listing() if e.has("error")}
    assert "enum must be a non-empty list of string values" in broken["a.yaml"]
    assert "default 'x' is not one of its enum values" in broken["b.yaml"]


def test_a_yaml_template_without_parameters_block_lists_its_placeholders(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(
        templates_dir,
        "loose.yaml",
        "name: loose\nsteps: [{skill: monitor, tool: get_alarms, params: {target: '{{where}}'}}]\n",
    )
    entry = registry.describe("loose").model_dump()
    assert entry["parameters"] == [{"name": "where", "type": "string", "required": True, "description": ""}]
    assert registry.create("loose", entry["example"]["arguments"]["params"], "t").steps[0].params == {
        "target": "<where>"
    }


def test_describing_an_unknown_template_is_refused_with_a_hint(registry: TemplateRegistry) -> None:
    with pytest.raises(TemplateError) as refused:
        registry.describe("nope")
    assert "list_workflows" in refused.value.hint


OPTIONAL = """name: tag_vm
parameters:
  vm_name: {type: string}
  note: {type: string, required: false, description: Free text}
steps:
  - {skill: monitor, tool: get_vm_info, params: {vm_name: "{{vm_name}}"}}
"""


def test_an_optional_yaml_parameter_without_default_is_listed_with_null_and_left_out_when_bound(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(templates_dir, "tag.yaml", OPTIONAL)
    entry = registry.describe("tag_vm")
    assert entry.model_dump()["parameters"] == [
        {"name": "vm_name", "type": "string", "required": True, "description": ""},
        {"name": "note", "type": "string", "required": False, "description": "Free text", "default": None},
    ]
    assert [p.text() for p in entry.parameters] == ["vm_name (string, required)", "note (string, optional)"]
    assert "note" not in registry.create("tag_vm", {"vm_name": "web"}, "t").params
    with pytest.raises(TemplateParamError) as refused:
        registry.create("tag_vm", {}, "t")
    assert "tag_vm takes vm_name (string, required), note (string, optional)" in refused.value.hint


def test_a_listed_parameter_reads_back_from_its_wire_text_unchanged(registry: TemplateRegistry) -> None:
    for entry in registry.listing():
        text = entry.model_dump_json()
        assert type(entry).model_validate_json(text).model_dump_json() == text
