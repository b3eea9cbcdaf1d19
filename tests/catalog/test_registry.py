from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from vmware_pilot.app import CatalogFile, read_catalog
from vmware_pilot.catalog.curated import CURATED
from vmware_pilot.catalog.registry import Catalog, risk_from_annotations
from vmware_pilot.errors import InvalidInput


def _expected_risk(annotations: dict[str, Any] | None) -> str:
    ann = annotations or {}
    if ann.get("readOnlyHint"):
        return "low"
    if ann.get("destructiveHint") is False:
        return "medium"
    return "high"


@pytest.mark.parametrize("spelling", ["aiops", "vmware-aiops", "vmware_aiops", "AIops", " VMware-AIops "])
def test_tool_lookup_accepts_every_skill_spelling(spelling: str) -> None:
    info = Catalog.curated().tool(spelling, "power_off_vm")
    assert info is not None
    assert (info.skill, info.name, info.risk, info.source) == ("aiops", "power_off_vm", "high", "curated")


def test_nsx_mgmt_package_name_is_the_nsx_skill() -> None:
    assert Catalog.curated().risk("vmware-nsx-mgmt", "delete_segment") == "high"


def test_risk_uses_exact_entry_then_highest_same_named_tool_of_any_skill() -> None:
    snapshot = {
        "alpha": {"tools": [{"name": "shared_op", "annotations": {"readOnlyHint": True}}]},
        "beta": {"tools": [{"name": "shared_op", "annotations": {"destructiveHint": True}}]},
        "gamma": {"tools": [{"name": "shared_op", "annotations": {"destructiveHint": False}}]},
    }
    cat = Catalog.from_snapshot(snapshot)
    assert cat.risk("alpha", "shared_op") == "low"
    assert cat.risk("gamma", "shared_op") == "medium"
    assert cat.risk("elsewhere", "shared_op") == "high"
    assert cat.risk("misspelt-skill", "power_off_vm") == "high"
    assert cat.risk("aiops", "no_such_tool") is None


@pytest.mark.parametrize(
    ("annotations", "risk"),
    [
        ({"readOnlyHint": True, "destructiveHint": False}, "low"),
        ({"readOnlyHint": False, "destructiveHint": True}, "high"),
        ({"readOnlyHint": False, "destructiveHint": False}, "medium"),
        ({"readOnlyHint": False}, "high"),  # MCP: an absent destructiveHint means destructive
        (None, "high"),
    ],
)
def test_risk_from_annotations(annotations: dict[str, Any] | None, risk: str) -> None:
    assert risk_from_annotations(annotations) == risk


def test_snapshot_adds_discovered_tools_with_annotation_risk_and_keeps_curated_risk(
    companion_tools: dict[str, Any],
) -> None:
    cat = Catalog.from_snapshot(companion_tools)
    payload = cat.payload()
    extra = 0
    for skill, entry in companion_tools.items():
        curated_tools = CURATED[skill]["tools"]
        for tool in entry["tools"]:
            name = tool["name"]
            info = cat.tool(skill, name)
            assert info is not None
            assert info.input_schema == tool["inputSchema"]
            assert info.annotations == tool["annotations"]
            if name in curated_tools:
                assert payload[skill]["tools"][name] == curated_tools[name]
                assert info.source == "curated"
            else:
                extra += 1
                assert payload[skill]["tools"][name]["risk"] == _expected_risk(tool["annotations"])
                assert info.source == "discovered"
                assert "\n" not in payload[skill]["tools"][name]["desc"]
    assert extra > 0
    assert sum(len(s["tools"]) for s in payload.values()) == 101 + extra
    assert cat.skills() == Catalog.curated().skills()  # every snapshot skill is curated


def test_knows_tools_only_of_discovered_skills(companion_tools: dict[str, Any]) -> None:
    cat = Catalog.from_snapshot(companion_tools)
    assert cat.knows_tools_of("vmware-aiops")
    assert not cat.knows_tools_of("debug")
    assert not Catalog.curated().knows_tools_of("aiops")
    assert cat.has_tool("aiops", "power_on_vm") is True
    assert cat.has_tool("aiops", "power_on") is False
    assert cat.has_tool("debug", "anything") is None
    assert cat.tool_names("monitor") == [t["name"] for t in companion_tools["monitor"]["tools"]]


def test_discovered_only_skill_comes_after_curated_skills() -> None:
    cat = Catalog.from_snapshot(
        {
            "vmware-newthing": {
                "server": "/opt/bin/vmware-newthing-mcp",
                "version": "1.2",
                "tools": [{"name": "list_x"}],
            }
        }
    )
    assert cat.skills()[-1] == "newthing"
    assert cat.skills()[:-1] == Catalog.curated().skills()
    assert "vmware-newthing-mcp 1.2" in cat.payload()["newthing"]["description"]
    assert cat.payload()["newthing"]["tools"] == {"list_x": {"risk": "high", "desc": ""}}


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"aiops": []},
        {"aiops": {"tools": "x"}},
        {"aiops": {"tools": [{"description": "no name"}]}},
        {"aiops": {"tools": [{"name": "t", "inputSchema": "not an object"}]}},
    ],
)
def test_malformed_snapshot_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        Catalog.from_snapshot(bad)


def test_load_missing_cache_gives_curated_catalog(tmp_path: Path) -> None:
    cat = read_catalog(CatalogFile(tmp_path / "catalog.json"))
    assert cat.payload() == Catalog.curated().payload()
    assert not cat.knows_tools_of("aiops")


def test_load_reads_cache_in_snapshot_format_with_refreshed_at(
    tmp_path: Path, companion_tools: dict[str, Any]
) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({**companion_tools, "refreshed_at": "2026-11-30T03:04:05+00:00"}))
    cat = read_catalog(CatalogFile(path))
    assert cat.refreshed_at == "2026-11-30T03:04:05+00:00"
    assert cat.payload() == Catalog.from_snapshot(companion_tools).payload()
    assert cat.knows_tools_of("storage")


@pytest.mark.parametrize("content", ["{not json", '{"aiops": {"tools": 3}}', "[]"])
def test_load_broken_cache_falls_back_to_curated_with_a_warning(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="vmware_pilot.catalog.registry"):
        cat = read_catalog(CatalogFile(path))
    assert cat.payload() == Catalog.curated().payload()
    assert any("catalog refresh" in r.getMessage() for r in caplog.records)
