"""Facts read from the 2.4.0 behaviour reference, so tests compare against it, not against our data."""

from __future__ import annotations

import re

from tests.conftest import SHARED

_REFERENCE = SHARED / "reference" / "vmware-pilot-2.4.0.md"


def _section(title: str) -> str:
    text = _REFERENCE.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.index("\n## ", start + len(title))
    return text[start:end]


def catalog_rows() -> list[tuple[str, str, str, str, str]]:
    """(skill, skill description, tool, risk, tool description) per row of the §10 table, in order."""
    rows: list[tuple[str, str, str, str, str]] = []
    skill = skill_desc = ""
    for line in _section("## 10. Skill catalog").splitlines():
        m = re.match(r"^\| *([^|]*?) *\| *([^|]*?) *\| *`([^`]+)` *\| *(\w+) *\| *(.*?) *\|$", line)
        if not m:
            continue
        if m[1]:
            skill, skill_desc = m[1], m[2]
        rows.append((skill, skill_desc, m[3], m[4], m[5]))
    return rows


def rename_pairs() -> dict[str, dict[str, str]]:
    """{server: {old: new}} from the full table of §8."""
    out: dict[str, dict[str, str]] = {}
    for line in _section("## 8. Tool renames").splitlines():
        m = re.match(r"^- \*\*(vmware-[\w-]+)\*\* \((\d+)\): (.*)$", line)
        if not m:
            continue
        pairs = dict(re.findall(r"`(\w+)`→`(\w+)`", m[3]))
        assert len(pairs) == int(m[2]), f"{m[1]}: parsed {len(pairs)} pairs, table says {m[2]}"
        out[m[1]] = pairs
    return out
