"""Behaviour tables: YAML files under tests/data/rules/, one row per case, each row read by a test
that runs the code on the row's input and compares with the row's expected outcome."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any

import yaml

from tests.support import DATA

RULES = DATA / "rules"


@functools.cache
def _parsed(name: str) -> list[Any]:
    loaded: list[Any] = yaml.load((RULES / name).read_text(), Loader=yaml.CSafeLoader)
    return loaded


def rows(name: str, key: str | None = None) -> list[Any]:
    """The rows of ``tests/data/rules/NAME`` (those under ``key`` where rows are tagged): a copy of
    the file, parsed once per process (YAML parsing is the slow part of these tests)."""
    loaded = copy.deepcopy(_parsed(name))
    return [r[key] for r in loaded if key in r] if key is not None else loaded


def mismatches(table: list[Any], got: Callable[[Any], Any], expected: Callable[[Any], Any]) -> list[str]:
    """The rows where the code gives something else than the table says, as ``row N: got … expected …``
    (N counts from 0 in the table, or in the rows under the key); compared as JSON text, so key order
    counts too. One test per table: a row is a case, not a test of its own (the fast tier's time)."""
    found = []
    for i, row in enumerate(table):
        actual, wanted = json.dumps(got(row)), json.dumps(expected(row))
        if actual != wanted:
            found.append(f"row {i}: got {actual[:600]} expected {wanted[:600]}")
    return found
