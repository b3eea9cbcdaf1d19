from __future__ import annotations

import re
from pathlib import Path

import pytest

import vmware_pilot
from tests.support.catalog_expected import rename_pairs
from vmware_pilot.catalog.renames import rename_tool, skill_key
from vmware_pilot.dispatch.locate import package_name
from vmware_pilot.templates.steps import make_step, step_from_dict
from vmware_pilot.templates.toolfacts import ToolFacts


def test_every_2_4_0_rename_maps_old_name_to_new_name() -> None:
    table = rename_pairs()
    assert len(table) == 11
    assert sum(len(p) for p in table.values()) == 173
    for server, pairs in table.items():
        for old, new in pairs.items():
            assert rename_tool(server, old) == new, (server, old)
            assert rename_tool(server, new) == new, (server, new)


@pytest.mark.parametrize(
    ("skill", "old", "new"),
    [
        ("aiops", "vm_power_off", "power_off_vm"),
        ("vmware-aiops", "vm_clone", "clone_vm"),
        ("vmware_aiops", "vm_guest_exec", "run_vm_guest_command"),
        ("AIops", "vm_rollback_plan", "rollback_vm_plan"),
        ("vks", "get_tkc_kubeconfig", "issue_tkc_kubeconfig"),
        ("vks", "list_vm_snapshots", "list_vm_service_snapshots"),
        ("monitor", "vm_info", "get_vm_info"),
        ("vmware-monitor", "snapshot_aging", "find_aging_snapshots"),
    ],
)
def test_step_built_with_an_old_name_carries_the_new_name(skill: str, old: str, new: str) -> None:
    step = make_step(0, "x", skill, old, {}, rollback_tool=old)
    assert step.tool == new
    assert step.rollback_tool == new
    assert step.skill == skill  # the skill string is kept as written


def test_renames_apply_to_step_dicts_too() -> None:
    step = step_from_dict({"skill": "aiops", "tool": "vm_power_on", "rollback_tool": "vm_power_off"}, 3)
    assert (step.tool, step.rollback_tool) == ("power_on_vm", "power_off_vm")


@pytest.mark.parametrize(
    ("skill", "tool"),
    [
        ("aiops", "list_vm_snapshots"),  # current in aiops, old only in vks
        ("monitor", "list_vm_snapshots"),
        ("aiops", "no_such_tool"),
        ("nsx", "list_segments"),
        ("nsx-security", "create_dfw_rule"),
        ("unknown-skill", "vm_power_off"),
        ("aiops", ""),
    ],
)
def test_current_or_unknown_names_are_unchanged(skill: str, tool: str) -> None:
    assert rename_tool(skill, tool) == tool


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("aiops", "aiops"),
        (" vmware-aiops ", "aiops"),
        ("vmware_aiops", "aiops"),
        ("AIops", "aiops"),
        ("log_insight", "log-insight"),
        ("vmware-nsx-security", "nsx-security"),
        ("vmware-nsx-mgmt", "nsx"),
        ("nsx_mgmt", "nsx"),
        (None, ""),
    ],
)
def test_skill_key_normalizes_spellings(raw: object, key: str) -> None:
    assert skill_key(raw) == key


def test_the_nsx_package_alias_is_stated_once() -> None:
    """vmware-nsx-mgmt serving the nsx skill is written in one table: every other module that
    needs it (finding servers, tool facts) derives from it."""
    src = Path(vmware_pilot.__file__).parent
    stating = sorted(
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if re.search(r"""["']nsx-mgmt["']|["']vmware-nsx-mgmt["']""", path.read_text(encoding="utf-8"))
    )
    assert stating == ["catalog/renames.py"]
    assert package_name("nsx") == package_name("vmware-nsx-mgmt") == "vmware-nsx-mgmt"
    assert ToolFacts(lambda skill, tool: {"skill": skill}).schema("vmware-nsx-mgmt", "list_segments") == {
        "skill": "nsx"
    }
