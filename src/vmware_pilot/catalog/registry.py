"""The skill catalog the safety rules read: curated entries plus tools discovered from real skills.

Curated data (``catalog.curated``) always wins for risk and description. Discovered data comes
from the companion-tools format ``{skill: {server, version, tools: [{name, description,
inputSchema, annotations}]}}`` (the discovery cache adds optional ``refreshed_at`` and ``installed``) and adds
input schemas, annotations, and tools or skills the curated table lacks. Skills are matched by
``renames.skill_key`` (``aiops`` == ``vmware-aiops`` == ``vmware_aiops``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal

from vmware_pilot.catalog.curated import CURATED, RISK_LEVELS
from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.errors import InvalidInput

__all__ = ["Catalog", "DiscoveredSkill", "ToolInfo", "risk_from_annotations", "risk_rank"]

_log = logging.getLogger(__name__)

_DESC_MAX = 160


@dataclass(frozen=True)
class ToolInfo:
    """One tool of one skill. ``source`` says where ``risk`` came from."""

    skill: str
    name: str
    risk: str
    description: str
    input_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    source: Literal["curated", "discovered"] = "curated"


@dataclass(frozen=True)
class DiscoveredSkill:
    """The full tool list one skill's MCP server reported (or a snapshot of it)."""

    skill: str
    server: str
    version: str
    tools: tuple[dict[str, Any], ...]
    refreshed_at: str = ""


def risk_rank(risk: str | None) -> int:
    """Position in low < medium < high < critical; -1 for anything else."""
    return RISK_LEVELS.index(risk) if risk in RISK_LEVELS else -1


def risk_from_annotations(annotations: Mapping[str, Any] | None) -> str:
    """Risk of a tool the curated table lacks, from its MCP annotations.

    ``readOnlyHint`` → low; ``destructiveHint`` → high; a write that declares
    ``destructiveHint: false`` → medium. A write that does not say is treated as destructive,
    which is also the MCP default for an absent ``destructiveHint``.
    """
    ann = annotations or {}
    if ann.get("readOnlyHint") is True:
        return "low"
    if ann.get("destructiveHint", True) is False:
        return "medium"
    return "high"


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= _DESC_MAX else line[: _DESC_MAX - 1] + "…"


def _parse(data: Any) -> tuple[dict[str, DiscoveredSkill], str]:
    """Validate the companion-tools format; raise InvalidInput naming the first bad part."""
    if not isinstance(data, Mapping):
        raise InvalidInput(f"catalog data must be an object keyed by skill, got {type(data).__name__}")
    top_refreshed = data.get("refreshed_at")
    out: dict[str, DiscoveredSkill] = {}
    for raw_skill, entry in data.items():
        if raw_skill == "refreshed_at" and not isinstance(entry, Mapping):
            continue
        if raw_skill == "installed" and isinstance(entry, Mapping) and "tools" not in entry:
            continue  # the discovery cache's record of what was installed (dispatch.discovery)
        key = skill_key(raw_skill)
        if not key:
            raise InvalidInput(f"catalog data has an empty skill name {raw_skill!r}")
        if not isinstance(entry, Mapping) or not isinstance(entry.get("tools"), list):
            raise InvalidInput(f"catalog entry {raw_skill!r} must be an object with a 'tools' list")
        tools: list[dict[str, Any]] = []
        for i, tool in enumerate(entry["tools"]):
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if not isinstance(name, str) or not name.strip():
                raise InvalidInput(f"catalog entry {raw_skill!r}: tool {i} has no name")
            for field, kind in (("description", str), ("inputSchema", Mapping), ("annotations", Mapping)):
                value = tool.get(field)
                if value is not None and not isinstance(value, kind):
                    raise InvalidInput(f"catalog entry {raw_skill!r}: tool {name!r} has a malformed {field}")
            tools.append(dict(tool))
        out[key] = DiscoveredSkill(
            skill=key,
            server=str(entry.get("server") or ""),
            version=str(entry.get("version") or ""),
            tools=tuple(tools),
            refreshed_at=str(entry.get("refreshed_at") or top_refreshed or ""),
        )
    return out, str(top_refreshed or "")


class Catalog:
    """Curated + discovered skills and tools. Immutable once built; cheap to query."""

    def __init__(
        self, discovered: Mapping[str, DiscoveredSkill] | None = None, refreshed_at: str = ""
    ) -> None:
        self.discovered: dict[str, DiscoveredSkill] = dict(discovered or {})
        self.refreshed_at = refreshed_at
        self._descriptions: dict[str, str] = {}
        self._tools: dict[str, dict[str, ToolInfo]] = {}
        for skill, entry in CURATED.items():
            self._descriptions[skill] = entry["description"]
            self._tools[skill] = {
                name: ToolInfo(skill, name, tool["risk"], tool["desc"])
                for name, tool in entry["tools"].items()
            }
        for skill, found in self.discovered.items():
            if skill not in self._tools:
                server = PurePath(found.server).name if found.server else f"vmware-{skill}-mcp"
                self._descriptions[skill] = f"Tools discovered from {server} {found.version}".strip()
                self._tools[skill] = {}
            table = self._tools[skill]
            for tool in found.tools:
                name = str(tool["name"]).strip()
                schema, ann = tool.get("inputSchema"), tool.get("annotations")
                known = table.get(name)
                if known is not None and known.source == "curated":
                    table[name] = ToolInfo(skill, name, known.risk, known.description, schema, ann, "curated")
                else:
                    desc = _first_line(str(tool.get("description") or ""))
                    table[name] = ToolInfo(
                        skill, name, risk_from_annotations(ann), desc, schema, ann, "discovered"
                    )
        self._names: dict[str, frozenset[str]] = {
            skill: frozenset(str(t["name"]).strip() for t in found.tools)
            for skill, found in self.discovered.items()
        }
        self._highest: dict[str, str] = {}
        for table in self._tools.values():
            for info in table.values():
                if risk_rank(info.risk) > risk_rank(self._highest.get(info.name)):
                    self._highest[info.name] = info.risk

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def curated(cls) -> Catalog:
        """The curated catalog alone (13 skills, 101 tools)."""
        return cls()

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any]) -> Catalog:
        """Curated + the skills of a companion-tools snapshot; InvalidInput when it is malformed."""
        discovered, refreshed = _parse(data)
        return cls(discovered, refreshed)

    @classmethod
    def from_text(cls, text: str, where: str) -> Catalog:
        """Curated + the discovery cache's JSON ``text`` (read from ``where``); a broken one means
        curated only (logged)."""
        try:
            return cls.from_snapshot(json.loads(text))
        except (ValueError, InvalidInput) as exc:
            _log.warning(
                "skill catalog cache %s is broken (%s); using the curated catalog. "
                "Run `vmware-pilot catalog refresh` to rebuild it.",
                where,
                exc,
            )
            return cls()

    # --- queries -------------------------------------------------------------------------------
    def skills(self) -> list[str]:
        """Curated skills in curated order, then skills known only from discovery."""
        return list(self._tools)

    def has_skill(self, skill: str) -> bool:
        return skill_key(skill) in self._tools

    def description(self, skill: str) -> str:
        return self._descriptions.get(skill_key(skill), "")

    def tool(self, skill: str, tool: str) -> ToolInfo | None:
        """The exact (skill, tool) entry, curated or discovered."""
        return self._tools.get(skill_key(skill), {}).get(tool)

    def tools_of(self, skill: str) -> list[ToolInfo]:
        return list(self._tools.get(skill_key(skill), {}).values())

    def risk(self, skill: str, tool: str) -> str | None:
        """Risk of the exact entry; else the highest risk of any skill's tool with that name."""
        info = self.tool(skill, tool)
        if info is not None:
            return info.risk
        return self._highest.get(tool)

    def knows_tools_of(self, skill: str) -> bool:
        """True when the full tool list of the skill is known (discovered or from a snapshot)."""
        return skill_key(skill) in self._names

    def has_tool(self, skill: str, tool: str) -> bool | None:
        """Whether the skill's server offers the tool; None when its tool list is not known."""
        names = self._names.get(skill_key(skill))
        return None if names is None else tool in names

    def tool_names(self, skill: str) -> list[str]:
        """The tools the skill's server offers when known, else the catalog's entries for it."""
        key = skill_key(skill)
        if key in self.discovered:
            return [str(t["name"]).strip() for t in self.discovered[key].tools]
        return list(self._tools.get(key, {}))

    def payload(self) -> dict[str, Any]:
        """The get_skill_catalog result: ``{skill: {description, tools: {tool: {risk, desc}}}}``."""
        return {
            skill: {
                "description": self._descriptions[skill],
                "tools": {
                    name: {"risk": info.risk, "desc": info.description} for name, info in table.items()
                },
            }
            for skill, table in self._tools.items()
        }
