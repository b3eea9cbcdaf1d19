"""The write tools' effects as data (``catalog/effects.json``) against the companions' real tool
schemas (``tests/data/companion-tools.json``): every declared tool exists and writes, every
parameter a declaration reads is one the tool takes, every object kind is one the gate reads for
that skill, and every field is one the gate reads or a declared unread one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from vmware_pilot.catalog.effects import Condition, Effect, Setting, ValueSpec, effect_of, effects
from vmware_pilot.engine.targets import KINDS, kind_of

# Fields a declaration may name besides the kind's shown fields: existence for every kind, the
# VM's snapshots and Tools status (read at the gate beside the summary), and the fields the gate
# does not read, whose value before a step is "not known" (a host's cluster and maintenance mode).
_EXTRA = {"exists"}
_BY_KIND = {"vm": {"snapshots", "tools_status"}, "host": {"cluster", "maintenance_mode"}}


def _schema(companion_tools: dict[str, Any], skill: str, tool: str) -> dict[str, Any] | None:
    return next((t for t in companion_tools[skill]["tools"] if t["name"] == tool), None)


def _params(effect: Effect) -> set[str]:
    found = {ref.param for ref in effect.objects.values()}
    parts: list[Condition | Setting] = [*effect.requires, *effect.nothing_to_do, *effect.sets]
    for part in parts:
        if isinstance(part, Condition) and part.param:
            found.add(part.param)
        if part.when is not None:
            found.add(part.when.param)
        values = [part.expected()] if isinstance(part, Condition) else [part.to, part.add, part.remove]
        found |= {v.param for v in values if isinstance(v, ValueSpec)}
    return found


def _declared() -> list[tuple[str, str]]:
    return [(skill, tool) for skill, tools in effects().items() for tool in tools]


@pytest.mark.parametrize(("skill", "tool"), _declared())
def test_every_declared_tool_is_a_real_write_tool_and_reads_only_params_it_takes(
    companion_tools: dict[str, Any], skill: str, tool: str
) -> None:
    schema = _schema(companion_tools, skill, tool)
    assert schema is not None, f"{skill}.{tool} is declared but no companion has it"
    assert not schema["annotations"].get("readOnlyHint"), f"{skill}.{tool} is a read"
    effect = effect_of(skill, tool)
    assert effect is not None
    taken = set(schema["inputSchema"].get("properties") or {})
    assert _params(effect) <= taken, (skill, tool, sorted(_params(effect) - taken))


@pytest.mark.parametrize(("skill", "tool"), _declared())
def test_every_object_is_one_the_gate_reads_and_every_field_one_it_knows(skill: str, tool: str) -> None:
    effect = effect_of(skill, tool)
    assert effect is not None
    kinds = {k.kind for k in KINDS}
    for alias, ref in effect.objects.items():
        assert ref.kind in kinds, (tool, ref.kind)
        row = kind_of(ref.kind)
        assert skill in row.skills, f"the gate does not read {ref.kind} objects of {skill}"
        # The gate reads the object this parameter names (engine.targets names it for the step).
        assert ref.param in row.params or (tool, ref.param) in row.named_by, (tool, ref.param)
        known = set(row.fields) | _EXTRA | _BY_KIND.get(ref.kind, set())
        named = [c.field for c in (*effect.requires, *effect.nothing_to_do) if c.field]
        named += [s.field for s in effect.sets]
        for field in named:
            owner, _, name = field.partition(".")
            if owner == alias:
                assert name in known, (tool, field)


def test_the_vm_power_snapshot_migrate_create_clone_delete_guest_and_membership_tools_are_declared(
    companion_tools: dict[str, Any],
) -> None:
    wanted = re.compile(
        r"^(power_|create_vm$|delete_vm$|.*_snapshot$|migrate_vm|.*clone|deploy_|.*guest|"
        r"(add|remove)_cluster_host|(create|delete|configure)_cluster$|reconfigure_vm)"
    )
    aiops = [t["name"] for t in companion_tools["aiops"]["tools"] if not t["annotations"].get("readOnlyHint")]
    missing = [t for t in aiops if wanted.match(t) and effect_of("aiops", t) is None]
    assert missing == []
    assert len([t for t in aiops if wanted.match(t)]) >= 25


def test_a_tool_without_a_declaration_has_no_effect_and_a_malformed_declaration_is_refused() -> None:
    assert effect_of("aiops", "apply_vm_plan") is None
    assert effect_of("nobody", "power_on_vm") is None
    with pytest.raises(ValueError, match="names no object"):
        Effect.model_validate({"objects": {}, "sets": [{"field": "vm.power_state", "to": "poweredOn"}]})
    with pytest.raises(ValueError, match="one field or param and one test"):
        Condition.model_validate({"field": "vm.exists", "is": True, "is_not": False})
