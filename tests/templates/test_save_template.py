"""save_as_template: an owner-only file with secrets masked, that loads and creates again."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from vmware_pilot.errors import InvalidInput
from vmware_pilot.templates.registry import TemplateRegistry
from vmware_pilot.templates.steps import steps_from_dicts

STEPS = [
    {"action": "look", "skill": "monitor", "tool": "vm_info", "params": {"vm_name": "a"}, "group_id": "g"},
    {"action": "require_approval", "params": {"message": "Go?"}},
    {
        "action": "run",
        "skill": "aiops",
        "tool": "run_vm_guest_command",
        "params": {
            "vm_name": "a",
            "command": "ls",
            "username": "root",
            "password": "hunter2",
            "db_password": "s3cret",
            "confirm": True,
        },
    },
    {
        "action": "up",
        "skill": "aiops",
        "tool": "power_on_vm",
        "params": {"vm_name": "a", "api_token": {"$env": "TOKEN"}},
        "rollback_tool": "power_off_vm",
        "rollback_params": {"vm_name": "a", "confirm": True},
    },
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_save_writes_an_owner_only_file_with_secrets_masked(
    registry: TemplateRegistry, templates_dir: Path
) -> None:
    path = registry.save_as_template(
        "ops", "Ops run", steps_from_dicts(STEPS), ["bob", "", "alice", "bob"], caller="bob"
    )
    assert path == templates_dir / "ops.yaml"
    assert (mode(path), mode(templates_dir)) == (0o600, 0o700)
    text = path.read_text()
    assert "hunter2" not in text and "s3cret" not in text
    doc = yaml.safe_load(text)
    assert list(doc) == ["name", "description", "steps", "authors"]
    assert (doc["name"], doc["description"], doc["authors"]) == ("ops", "Ops run", ["alice", "bob"])
    assert doc["steps"][0] == {
        "action": "look",
        "skill": "monitor",
        "tool": "get_vm_info",
        "params": {"vm_name": "a"},
        "group_id": "g",
    }
    assert doc["steps"][1] == {
        "action": "require_approval",
        "skill": "pilot",
        "tool": "approve",
        "params": {"message": "Go?"},
    }
    assert doc["steps"][2]["params"]["password"] == "***"
    assert doc["steps"][2]["params"]["db_password"] == "***"
    assert doc["steps"][2]["params"]["username"] == "root"
    assert doc["steps"][3]["params"]["api_token"] == {"$env": "TOKEN"}  # a reference holds no secret
    assert doc["steps"][3]["rollback_tool"] == "power_off_vm"
    assert [p.name for p in templates_dir.iterdir()] == ["ops.yaml"]  # no temporary file left


def test_saved_template_round_trips(registry: TemplateRegistry) -> None:
    original = steps_from_dicts(STEPS)
    registry.save_as_template("ops", "Ops run", original, ["alice"], caller="alice")
    (entry,) = [e.model_dump() for e in registry.listing() if e.type == "custom"]
    assert entry["parameters"] == []  # the saved steps use no placeholders
    assert {k: entry[k] for k in ("name", "description", "file", "steps", "type")} == {
        "name": "ops",
        "description": "Ops run",
        "file": "ops.yaml",
        "steps": 4,
        "type": "custom",
    }
    wf = registry.create("ops", {}, "carol")
    assert [(s.action, s.skill, s.tool, s.rollback_tool, s.group_id) for s in wf.steps] == [
        (s.action, s.skill, s.tool, s.rollback_tool, s.group_id) for s in original
    ]
    assert wf.steps[3].params == original[3].params
    assert wf.steps[2].params["password"] == "***"
    assert (wf.params["_source"], wf.authors) == ("ops.yaml", ["alice"])


def test_an_author_saving_again_replaces_it_keeps_its_authors_and_stays_owner_only(
    registry: TemplateRegistry,
) -> None:
    registry.save_as_template("ops", "v1", steps_from_dicts(STEPS[:1]), ["alice", "bob"], caller="alice")
    path = registry.save_as_template("ops", "v2", steps_from_dicts(STEPS[:2]), ["bob"], caller="bob")
    assert mode(path) == 0o600
    doc = yaml.safe_load(path.read_text())
    assert (doc["description"], len(doc["steps"]), doc["authors"]) == ("v2", 2, ["alice", "bob"])


@pytest.mark.parametrize(
    "existing",
    [
        "name: ops\nauthors: [alice]\nsteps: [{skill: monitor, tool: get_alarms}]\n",
        "name: ops\nsteps: [{skill: monitor, tool: get_alarms}]\n",  # written by hand: no authors
        "name: ops\nsteps: [[[\n",  # unreadable: its authors are unknown
    ],
)
def test_someone_elses_template_is_never_replaced(
    registry: TemplateRegistry, templates_dir: Path, existing: str
) -> None:
    templates_dir.mkdir()
    (templates_dir / "ops.yaml").write_text(existing)
    with pytest.raises(InvalidInput) as info:
        registry.save_as_template("ops", "mine", steps_from_dicts(STEPS[:1]), ["mallory"], caller="mallory")
    assert "nothing was saved" in info.value.message and "'ops_2'" in info.value.hint
    assert (templates_dir / "ops.yaml").read_text() == existing
    assert [p.name for p in templates_dir.iterdir()] == ["ops.yaml"]


@pytest.mark.parametrize("name", ["", "  ", "a/b", "a\\b", ".hidden", "nul\0", "x" * 101])
def test_unusable_names_are_refused(registry: TemplateRegistry, templates_dir: Path, name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        registry.save_as_template(name, "", steps_from_dicts(STEPS[:1]), [], caller="alice")
    assert info.value.field == "name" and info.value.hint
    assert not templates_dir.exists()


def test_builtin_name_is_refused_with_a_suggestion(registry: TemplateRegistry) -> None:
    with pytest.raises(InvalidInput) as info:
        registry.validate_template_name("rolling_restart")
    assert "built-in" in info.value.message and "'rolling_restart_custom'" in info.value.hint


def test_a_name_another_file_defines_is_refused(registry: TemplateRegistry, templates_dir: Path) -> None:
    templates_dir.mkdir()
    (templates_dir / "other.yml").write_text("name: ops\nsteps: [{skill: monitor, tool: get_alarms}]\n")
    with pytest.raises(InvalidInput) as info:
        registry.validate_template_name("ops")
    assert "other.yml" in info.value.message
    registry.validate_template_name("ops2")
