"""Custom YAML templates: parameters block, typed placeholders, broken files listed, no shadowing
of built-ins, the approval-gate rule on use, hot reload."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.config import Settings
from vmware_pilot.errors import ApprovalGateRefused, TemplateError, TemplateParamError
from vmware_pilot.safety.gating import is_custom_workflow
from vmware_pilot.templates.registry import TemplateRegistry


def write(folder: Path, file: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


RESIZE = """\
    name: resize_vm
    description: Resize one VM
    authors: [alice, bob]
    parameters:
      vm_name: {type: string, required: true, description: VM to resize}
      cpu: {type: integer, default: 2}
      hot: {type: boolean, default: false}
      tags: {type: array, default: []}
    steps:
      - action: resize
        skill: aiops
        tool: vm_reconfigure
        params: {vm_name: "{{vm_name}}", cpu: "{{cpu}}", note: "{{ vm_name }} to {{cpu}} vCPU, hot={{hot}}"}
      - action: tag
        skill: monitor
        tool: get_vm_info
        params: {vm_name: "{{vm_name}}", labels: "{{tags}}"}
"""


def custom_entries(registry: TemplateRegistry) -> list[dict[str, Any]]:
    return [e.model_dump() for e in registry.listing() if e.type == "custom"]


def test_parameters_block_types_defaults_and_typed_placeholders(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(templates_dir, "resize.yaml", RESIZE)
    wf = registry.create("resize_vm", {"vm_name": "web", "cpu": 3}, "carol")
    resize, tag = wf.steps
    assert resize.tool == "reconfigure_vm"  # old names are renamed on the way in
    assert resize.params == {"vm_name": "web", "cpu": 3, "note": "web to 3 vCPU, hot=false"}
    assert tag.params == {"vm_name": "web", "labels": []}
    assert wf.params == {
        "vm_name": "web",
        "cpu": 3,
        "hot": False,
        "tags": [],
        "_source": "resize.yaml",
        "_description": "Resize one VM",
    }
    assert (wf.workflow_type, wf.created_by, wf.authors) == ("resize_vm", "carol", ["alice", "bob"])
    assert is_custom_workflow(wf, registry.builtin_names())


@pytest.mark.parametrize(
    ("params", "field", "text"),
    [
        ({"vm_name": "web", "cpu": "3"}, "cpu", "must be integer, got str"),
        ({"vm_name": "web", "hot": 1}, "hot", "must be boolean"),
        ({"cpu": 3}, "vm_name", "missing required parameter 'vm_name'"),
        ({"vm_name": "web", "cpus": 3}, "cpus", "unknown parameter 'cpus'"),
    ],
)
def test_parameters_are_validated_on_use(
    registry: TemplateRegistry, templates_dir: Path, params: dict[str, Any], field: str, text: str
) -> None:
    write(templates_dir, "resize.yaml", RESIZE)
    with pytest.raises(TemplateParamError) as info:
        registry.create("resize_vm", params, "u")
    assert info.value.field == field and text in info.value.message
    assert "vm_name (string, required), cpu (integer, default 2)" in info.value.hint
    assert "resize.yaml" in info.value.hint


def test_without_a_parameters_block_an_unknown_placeholder_is_an_error(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(
        templates_dir,
        "free.yml",
        """\
        name: free
        steps:
          - {action: look, skill: monitor, tool: get_vm_info, params: {vm_name: "{{vm}}", limit: "{{n}}"}}
        """,
    )
    wf = registry.create("free", {"vm": "a", "n": 5, "extra": True}, "u")
    assert wf.steps[0].params == {"vm_name": "a", "limit": 5}
    with pytest.raises(TemplateParamError) as info:
        registry.create("free", {"vm": "a"}, "u")
    assert info.value.field == "n" and "{{n}}" in info.value.message
    assert "{{" not in str(registry.create("free", {"vm": "a", "n": 1}, "u").steps[0].params)


def test_placeholders_in_labels_and_names_are_filled_as_text(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(
        templates_dir,
        "labels.yaml",
        """\
        name: labels
        parameters:
          vm: {type: string}
          n: {type: integer, default: 2}
        steps:
          - action: "check {{vm}}"
            skill: monitor
            tool: get_vm_info
            params: {vm_name: "{{vm}}"}
            group_id: "{{n}}"
          - {action: "list {{ vm }}", skill: monitor, tool: list_virtual_machines, group_id: "{{n}}"}
        """,
    )
    first, second = registry.create("labels", {"vm": "web"}, "u").steps
    assert (first.action, first.group_id, second.action, second.group_id) == (
        "check web",
        "2",
        "list web",
        "2",
    )
    write(
        templates_dir,
        "free_label.yaml",
        """\
        name: free_label
        steps:
          - {action: "check {{vm}}", skill: monitor, tool: get_vm_info, params: {vm_name: a}}
        """,
    )
    with pytest.raises(TemplateParamError) as info:
        registry.create("free_label", {}, "u")
    assert info.value.field == "vm" and "step 0 action" in info.value.message


def test_group_id_is_honoured(registry: TemplateRegistry, templates_dir: Path) -> None:
    write(
        templates_dir,
        "reads.yaml",
        """\
        name: reads
        steps:
          - {action: a, skill: monitor, tool: get_alarms, group_id: g1}
          - {action: b, skill: monitor, tool: get_events, group_id: g1}
          - {action: c, skill: nsx, tool: list_segments}
        """,
    )
    assert [s.group_id for s in registry.create("reads", {}, "u").steps] == ["g1", "g1", ""]


@pytest.mark.parametrize(
    ("text", "name", "error"),
    [
        ("name: x\nsteps: [\n", "broken", "not valid YAML"),
        ("name: nosteps\ndescription: d\n", "nosteps", "'steps' must be a non-empty list"),
        ("name: typo\nparamters: {}\nsteps: [{skill: monitor, tool: get_alarms}]\n", "typo", "paramters"),
        ("name: badstep\nsteps: [{skill: monitor, tool: get_alarms, parms: {}}]\n", "badstep", "'parms'"),
        ("- just\n- a list\n", "broken", "must be a mapping"),
        (
            "name: undeclared\nparameters: {a: {type: string}}\n"
            "steps: [{skill: monitor, tool: get_vm_info, params: {vm_name: '{{b}}'}}]\n",
            "undeclared",
            "{{b}}",
        ),
        (
            "name: badtype\nparameters: {a: {type: str}}\nsteps: [{skill: monitor, tool: get_alarms}]\n",
            "badtype",
            "type 'str'",
        ),
        (
            "name: baddefault\nparameters: {a: {type: integer, default: x}}\nsteps: [{skill: monitor, tool: get_alarms}]\n",
            "baddefault",
            "default 'x' is not of type integer",
        ),
    ],
)
def test_a_file_that_fails_to_load_is_listed_with_its_error(
    registry: TemplateRegistry, templates_dir: Path, text: str, name: str, error: str
) -> None:
    write(templates_dir, "broken.yaml", text)
    (entry,) = custom_entries(registry)
    assert list(entry) == ["name", "file", "type", "error"]
    assert (entry["name"], entry["file"], entry["type"]) == (name, "broken.yaml", "custom")
    assert entry["error"].startswith("broken.yaml: ") and error in entry["error"]
    if name != "broken":
        with pytest.raises(TemplateError) as info:
            registry.create(name, {}, "u")
        assert "broken.yaml" in info.value.message and "fix" in info.value.hint.lower()


def test_a_file_reusing_a_builtin_name_is_refused_and_does_not_shadow_it(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(templates_dir, "mine.yaml", "name: compliance_scan\nsteps: [{skill: monitor, tool: get_alarms}]\n")
    (entry,) = custom_entries(registry)
    assert entry["name"] == "compliance_scan" and "rename" in entry["error"]
    assert "compliance_scan_custom" in entry["error"]
    wf = registry.create("compliance_scan", {}, "u")
    assert "_source" not in wf.params and len(wf.steps) == 3
    assert not is_custom_workflow(wf, registry.builtin_names())


def test_listing_orders_files_by_name_and_counts_steps(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(
        templates_dir,
        "b.yaml",
        "name: second\ndescription: two\nsteps: [{skill: monitor, tool: get_alarms}]\n",
    )
    write(
        templates_dir,
        "a.yml",
        "name: first\nsteps: [{skill: monitor, tool: get_alarms}, {skill: nsx, tool: list_segments}]\n",
    )
    write(templates_dir, "c.yaml", "name: second\nsteps: [{skill: monitor, tool: get_alarms}]\n")
    write(templates_dir, "notes.txt", "name: ignored\n")
    entries = custom_entries(registry)
    old_keys = ("name", "description", "file", "steps", "type")  # discovery adds parameters, example
    assert [{k: e[k] for k in old_keys} for e in entries[:2]] == [
        {"name": "first", "description": "", "file": "a.yml", "steps": 2, "type": "custom"},
        {"name": "second", "description": "two", "file": "b.yaml", "steps": 1, "type": "custom"},
    ]
    assert entries[2]["file"] == "c.yaml" and "already defined in b.yaml" in entries[2]["error"]
    assert len(entries) == 3
    assert [e.type for e in registry.listing()[:15]] == ["builtin"] * 15


def test_files_are_reread_on_every_call(registry: TemplateRegistry, templates_dir: Path) -> None:
    assert custom_entries(registry) == []
    path = write(templates_dir, "live.yaml", "name: live\nsteps: [{skill: monitor, tool: get_alarms}]\n")
    assert len(registry.create("live", {}, "u").steps) == 1
    path.write_text(
        "name: live\nsteps: [{skill: monitor, tool: get_alarms}, {skill: nsx, tool: list_segments}]\n"
    )
    assert len(registry.create("live", {}, "u").steps) == 2
    path.unlink()
    with pytest.raises(TemplateError):
        registry.create("live", {}, "u")


def test_unknown_type_lists_what_is_available(registry: TemplateRegistry, templates_dir: Path) -> None:
    write(templates_dir, "x.yaml", "name: mine\nsteps: [{skill: monitor, tool: get_alarms}]\n")
    with pytest.raises(TemplateError) as info:
        registry.create("nope", {}, "u")
    payload = info.value.payload()
    assert payload["error"].startswith("Unknown workflow type: nope. Available: ['clone_and_test', ")
    assert payload["error"].endswith("'baseline_remediate', 'mine']")
    assert "list_workflows" in payload["hint"]


def test_gate_rule_refusal_names_the_file(settings: Settings) -> None:
    folder = settings.resolved_templates_dir
    write(
        folder,
        "stop.yaml",
        """\
        name: stop_vm
        steps:
          - {action: look, skill: monitor, tool: get_vm_info, params: {vm_name: "{{vm}}"}}
          - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: "{{vm}}", confirm: true}}
        """,
    )
    registry = TemplateRegistry(folder, Catalog.curated(), home=Path.home())
    with pytest.raises(ApprovalGateRefused) as info:
        registry.create("stop_vm", {"vm": "a"}, "u")
    payload = info.value.payload()
    assert (
        "Refusing to plan custom workflow 'stop_vm' (defined in ~/.vmware/workflows/stop.yaml)"
        in payload["error"]
    )
    assert "create_workflow_from_template('stop_vm', ...)" in payload["error"]
    assert [v["step_index"] for v in payload["approval_gate_violations"]] == [1]
    assert payload["fix"]["insert_before_step"] == 1


def test_a_gated_yaml_template_is_accepted(registry: TemplateRegistry, templates_dir: Path) -> None:
    write(
        templates_dir,
        "stop.yaml",
        """\
        name: stop_vm
        steps:
          - {action: require_approval, params: {message: "Stop {{vm}}?"}}
          - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: "{{vm}}", confirm: true}}
        """,
    )
    wf = registry.create("stop_vm", {"vm": "a"}, "u")
    assert wf.steps[0].is_gate and wf.steps[0].params == {"message": "Stop a?"}


def test_the_readme_example_is_a_usable_template(
    snapshot_registry: TemplateRegistry, templates_dir: Path
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Templates", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    write(templates_dir, "readme.yaml", example)
    wf = snapshot_registry.create("restart_web", {"vm_name": "web-01"}, "u")
    assert [(s.tool, s.params) for s in wf.steps][1] == (
        "power_off_vm",
        {"vm_name": "web-01", "force": False, "confirm": True},
    )


def test_a_parameter_that_fills_a_secret_key_is_not_recorded_in_clear(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    write(
        templates_dir,
        "guest.yaml",
        """\
        name: guest_cmd
        parameters:
          vm: {type: string}
          admin_pass: {type: string}
          hint: {type: string, default: ""}
        steps:
          - {action: require_approval, params: {message: "Run on {{vm}}?"}}
          - action: run
            skill: aiops
            tool: run_vm_guest_command
            params:
              vm_name: "{{vm}}"
              username: root
              auth: {password: "{{admin_pass}}", note: "{{hint}}"}
              command: /bin/true
              confirm: true
        """,
    )
    wf = registry.create("guest_cmd", {"vm": "v1", "admin_pass": "s3cr3t-9"}, "u")
    assert wf.steps[1].params["auth"] == {"password": "s3cr3t-9", "note": ""}  # live, for dispatch
    assert wf.params["admin_pass"] == "***" and wf.params["vm"] == "v1" and wf.params["hint"] == ""
