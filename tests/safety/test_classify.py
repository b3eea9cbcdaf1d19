from __future__ import annotations

from typing import Any

import pytest

from tests.support.plans import step
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.safety.classify import Tier, classify_step, is_catalog_read

CURATED = Catalog.curated()


@pytest.mark.parametrize(
    ("skill", "tool", "action", "tier", "reason_part"),
    [
        ("aiops", "power_off_vm", "", Tier.DESTRUCTIVE, "risk 'high'"),
        ("aiops", "reconfigure_vm", "", Tier.WRITE, "risk 'medium'"),
        ("monitor", "get_alarms", "", Tier.READ, "risk 'low'"),
        # name hints win over the catalog and only escalate
        ("aiops", "rollback_vm_plan", "", Tier.DESTRUCTIVE, "'rollback'"),
        ("monitor", "get_alarms", "delete_old", Tier.DESTRUCTIVE, "'delete'"),
        ("custom", "force_power_off_all", "", Tier.DESTRUCTIVE, "'force_power_off'"),
        # catalog fallback across skills for an unknown skill spelling
        ("vmware_nsx_security", "delete_dfw_rule", "", Tier.DESTRUCTIVE, "'delete'"),
        ("somewhere", "reconfigure_vm", "", Tier.WRITE, "risk 'medium'"),
        # read hints on whole words only
        ("custom", "list_widgets", "", Tier.READ, "'list', which reads as an inspection"),
        ("custom", "widgetStatus", "", Tier.READ, "'status'"),
        ("custom", "set_target_budget", "", Tier.UNKNOWN, "not in the skill catalog"),
        ("custom", "frobnicate", "", Tier.UNKNOWN, "not in the skill catalog"),
    ],
)
def test_classification_follows_hint_catalog_hint_order(
    skill: str, tool: str, action: str, tier: Tier, reason_part: str
) -> None:
    got_tier, reason = classify_step(step(skill, tool, action=action), CURATED)
    assert got_tier is tier
    assert reason_part in reason


def test_discovered_annotations_classify_tools_the_curated_table_lacks(
    companion_tools: dict[str, Any],
) -> None:
    cat = Catalog.from_snapshot(companion_tools)
    assert classify_step(step("monitor", "get_host_sensors"), cat)[0] is Tier.READ
    assert classify_step(step("aiops", "create_drs_rule"), cat)[0] is Tier.WRITE
    assert classify_step(step("aiops", "revert_vm_snapshot"), cat)[0] is Tier.DESTRUCTIVE
    # without discovery the same write is unclassifiable
    assert classify_step(step("aiops", "create_drs_rule"), CURATED)[0] is Tier.UNKNOWN


def test_catalog_read_means_risk_exactly_low() -> None:
    assert is_catalog_read(step("monitor", "get_vm_info"), CURATED)
    assert is_catalog_read(step("elsewhere", "get_vm_info"), CURATED)  # cross-skill fallback
    assert not is_catalog_read(step("aiops", "power_on_vm"), CURATED)
    assert not is_catalog_read(step("custom", "list_widgets"), CURATED)  # name hints never count
