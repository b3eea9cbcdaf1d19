"""Behaviour tables: YAML files under tests/data/rules/, one row per case, read by parametrised tests."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support import DATA

RULES = DATA / "rules"


def rows(name: str, key: str | None = None) -> list[Any]:
    """The rows of ``tests/data/rules/NAME`` (those under ``key`` where rows are tagged), each a
    ``pytest.param`` with its position as id, so a failure names the row to look at."""
    loaded = yaml.load((RULES / name).read_text(), Loader=yaml.CSafeLoader)
    if key is not None:
        loaded = [r[key] for r in loaded if key in r]
    return [pytest.param(row, id=f"row{i}") for i, row in enumerate(loaded)]
