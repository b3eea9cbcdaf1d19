"""Sorting a step into a risk tier: destructive, write, read or unknown (docs/contract.md#risk-tiers).

Decision order: a destructive name hint in the tool or action (only ever escalates); the
catalog risk (exact entry, else the highest same-named tool of any skill); a read-only name
hint; otherwise unknown. Read hints match whole words of the tool name (``get_vm_info``,
not ``target_sync``), so a write whose name merely contains ``get`` is not taken for a read;
destructive hints match anywhere, which can only add gates.
"""

from __future__ import annotations

import re
from enum import StrEnum

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.model import Step

__all__ = [
    "DESTRUCTIVE_HINTS",
    "READ_HINTS",
    "Tier",
    "classify_step",
    "classify_tool",
    "is_catalog_read",
]


class Tier(StrEnum):
    DESTRUCTIVE = "destructive"
    WRITE = "write"
    READ = "read"
    UNKNOWN = "unknown"


DESTRUCTIVE_HINTS: tuple[str, ...] = (
    "delete",
    "remove",
    "destroy",
    "force_power_off",
    "shutdown",
    "drop",
    "rollback",
)
READ_HINTS: tuple[str, ...] = (
    "list",
    "get",
    "show",
    "browse",
    "scan",
    "status",
    "health",
    "fetch",
    "describe",
    "inspect",
)

_RISK_TIER = {"low": Tier.READ, "medium": Tier.WRITE, "high": Tier.DESTRUCTIVE, "critical": Tier.DESTRUCTIVE}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def _words(name: str) -> set[str]:
    return {w for w in _NON_ALNUM.split(_CAMEL.sub("_", name).lower()) if w}


def classify_tool(skill: str, tool: str, action: str, catalog: Catalog) -> tuple[Tier, str]:
    """The tier of (skill, tool, action) and a reason phrase ("its name contains 'delete'")."""
    tool_l, action_l = tool.lower(), action.lower()
    for hint in DESTRUCTIVE_HINTS:
        if hint in tool_l or hint in action_l:
            return Tier.DESTRUCTIVE, f"its name contains '{hint}'"
    risk = catalog.risk(skill, tool)
    if risk:
        return _RISK_TIER.get(risk, Tier.UNKNOWN), f"the skill catalog marks it risk '{risk}'"
    words = _words(tool)
    for hint in READ_HINTS:
        if hint in words:
            return Tier.READ, f"its name contains '{hint}', which reads as an inspection"
    return Tier.UNKNOWN, "it is not in the skill catalog and its name says nothing about what it changes"


def classify_step(step: Step, catalog: Catalog) -> tuple[Tier, str]:
    """Tier and reason of a (non-gate) step; see the module docstring for the rules."""
    return classify_tool(step.skill, step.tool, step.action, catalog)


def is_catalog_read(step: Step, catalog: Catalog) -> bool:
    """True when the catalog (with the cross-skill fallback) rates the tool exactly ``low``."""
    return catalog.risk(step.skill, step.tool) == "low"
