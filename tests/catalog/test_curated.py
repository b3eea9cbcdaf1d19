from __future__ import annotations

from collections import Counter

from tests.support.catalog_expected import catalog_rows, fingerprint
from vmware_pilot.catalog.registry import Catalog


def test_curated_catalog_has_the_2_4_0_skills_tools_and_risks_in_order() -> None:
    payload = Catalog.curated().payload()
    ours = [
        (skill, tool, entry["risk"]) for skill, s in payload.items() for tool, entry in s["tools"].items()
    ]
    assert ours == [(skill, tool, risk) for skill, _, tool, risk, _ in catalog_rows()]


def test_curated_catalog_counts_13_skills_101_tools_43_low_33_medium_25_high() -> None:
    payload = Catalog.curated().payload()
    risks = Counter(t["risk"] for s in payload.values() for t in s["tools"].values())
    assert len(payload) == 13
    assert sum(len(s["tools"]) for s in payload.values()) == 101
    assert risks == {"low": 43, "medium": 33, "high": 25}


def test_payload_shape_is_skill_to_description_and_tools_with_risk_and_desc() -> None:
    payload = Catalog.curated().payload()
    for skill, entry in payload.items():
        assert list(entry) == ["description", "tools"], skill
        assert isinstance(entry["description"], str) and entry["description"]
        for tool, info in entry["tools"].items():
            assert list(info) == ["risk", "desc"], tool
            assert info["desc"] and "\n" not in info["desc"]


def test_descriptions_are_our_own_words_not_the_2_4_0_text() -> None:
    payload = Catalog.curated().payload()
    for skill, skill_print, tool, _, tool_print in catalog_rows():
        assert fingerprint(payload[skill]["description"]) != skill_print, skill
        assert fingerprint(payload[skill]["tools"][tool]["desc"]) != tool_print, (skill, tool)


def test_skills_lists_curated_order() -> None:
    order = list(dict.fromkeys(skill for skill, *_ in catalog_rows()))
    assert Catalog.curated().skills() == order
