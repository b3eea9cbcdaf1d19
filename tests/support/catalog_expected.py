"""The 2.4.0 catalog and rename tables as the project's own test data (``tests/data/*-2.4.0.json``).

Tests compare the product against these files, never against the product's own tables. The
catalog file keeps 2.4.0's skills, tools and risks in order, and only a fingerprint (the first 16
hex digits of the SHA-256 of the UTF-8 text) of each 2.4.0 description: enough to prove ours
are not copies without storing the copy here. See docs/contract.md, "Skill catalog" and
"Tool renames".
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.support import DATA


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def fingerprint(text: str) -> str:
    """The fingerprint the catalog file keeps instead of a 2.4.0 description."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def catalog_rows() -> list[tuple[str, str, str, str, str]]:
    """(skill, skill fingerprint, tool, risk, tool fingerprint) per 2.4.0 catalog row, in order."""
    data: dict[str, dict[str, Any]] = _load("catalog-2.4.0.json")
    return [
        (skill, entry["description_sha256"], tool, row["risk"], row["desc_sha256"])
        for skill, entry in data.items()
        for tool, row in entry["tools"].items()
    ]


def rename_pairs() -> dict[str, dict[str, str]]:
    """{server: {old name: new name}}: the full 2.4.0 rename table."""
    data: dict[str, dict[str, str]] = _load("renames-2.4.0.json")
    return data
