"""Hypothesis strategies for tool arguments: valid-shaped, hostile, and everything in between.

Hostile values: huge and unbroken strings (around the string limit and far past it), deep
nesting (around the depth limit and far past it), control characters, NUL and lone surrogates,
wrong JSON types, unknown arguments, random step lists with step references that may or may
not resolve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from vmware_pilot.limits import MAX_DEPTH, MAX_LIST, MAX_STRING
from vmware_pilot.templates.builtin import BUILTINS

__all__ = ["TOOLS", "Known", "arguments_for", "json_values", "resolve", "text"]

# Any code point, surrogates and control characters included.
_ANY_CHAR = st.characters(codec=None, exclude_categories=())
_NASTY = st.sampled_from(
    ["\x00", "\x1b[2J", "\x1b]0;x\x07", "\ud800", "\udfff", "\u202e", "\r\n", "{{x}}", "'", '"', "\\"]
)

short_text = st.one_of(st.text(max_size=20), st.text(_ANY_CHAR, max_size=20), _NASTY)
# Object keys: any character but lone surrogates, which the SDK's client cannot send in a nested
# key (the HTTP fuzz sends them in raw bodies).
keys = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
    _NASTY.filter(str.isascii),
)
_HUGE_LENGTHS = st.sampled_from([201, 4_000, MAX_STRING, MAX_STRING + 1, 3 * MAX_STRING])
huge_text = st.builds(lambda n, c: c * n, _HUGE_LENGTHS, st.sampled_from(["a", "é", "\x00", " a", "\ud800"]))
text = st.one_of(short_text, st.text(_ANY_CHAR, max_size=300), huge_text)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)


def _nest(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


deep_values = st.builds(_nest, st.sampled_from([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 250]), _scalars)
long_lists = st.builds(lambda n: ["v"] * n, st.sampled_from([MAX_LIST, MAX_LIST + 1]))
hostile = st.one_of(json_values, deep_values, long_lists, huge_text)

_refs = st.one_of(
    st.builds(lambda n: f"__from_step_{n}__", st.integers(-2, 12)),
    st.builds(lambda n, key: f"__from_step_{n}__:{key}", st.integers(-1, 12), short_text),
    st.sampled_from(
        ["__from_step_", "__from_step_x__", "__from_step_1", "__from_step_01__", "__from_step_1__:"]
    ),
)
_param_values = st.one_of(_refs, json_values, st.sampled_from(["web-01", True, 2, "<vm name>", "TODO"]))
_ACTIONS = ["list", "get", "delete", "require_approval", "create", "power_on", "reconfigure"]
_SKILLS = ["aiops", "monitor", "pilot", "nsx", "storage", "vks"]
_TOOLS = [
    "list_virtual_machines",
    "get_vm_info",
    "delete_vm",
    "approve",
    "power_on_vm",
    "create_vm",
    "get_alarms",
]


def _one_of_or_hostile(names: list[str]) -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(names), st.sampled_from(names), short_text, hostile)


steps_item = st.one_of(
    st.fixed_dictionaries(
        {
            "action": _one_of_or_hostile(_ACTIONS),
            "skill": _one_of_or_hostile(_SKILLS),
            "tool": _one_of_or_hostile(_TOOLS),
            "params": st.one_of(
                st.dictionaries(
                    st.sampled_from(["vm_name", "confirm", "message", "note"]) | keys,
                    _param_values,
                    max_size=4,
                ),
                hostile,
            ),
        },
        optional={
            "rollback_tool": _one_of_or_hostile(["power_off_vm", "delete_vm"]),
            "rollback_params": st.dictionaries(keys, _param_values, max_size=3),
            "group_id": st.one_of(st.sampled_from(["g1", "g2"]), hostile),
            "extra": json_values,
        },
    ),
    hostile,
)
steps = st.one_of(st.lists(steps_item, max_size=8), hostile)

_TEMPLATE_NAMES = [t.name for t in BUILTINS]
_EXAMPLES = [dict(e) for t in BUILTINS for e in t.examples]


def _mutated(example: dict[str, Any], key_value: tuple[str, Any]) -> dict[str, Any]:
    key, value = key_value
    return {**example, key: value}


template_params = st.one_of(
    st.sampled_from(_EXAMPLES),
    st.builds(
        _mutated,
        st.sampled_from(_EXAMPLES),
        st.tuples(keys | st.sampled_from(["vm_name", "alert_entity"]), _param_values),
    ),
    st.dictionaries(keys, json_values, max_size=4),
    hostile,
)

# name → (kind, required) in each tool's input schema.
_SCHEMAS: dict[str, dict[str, str]] = {
    "create_workflow": {"name": "str", "description": "str", "steps": "steps", "save_as_template": "bool?"},
    "design_workflow": {"goal": "str", "constraints": "str?"},
    "update_draft": {"workflow_id": "id", "name": "str?", "description": "str?", "steps": "steps?"},
    "confirm_draft": {"workflow_id": "id", "save_as_template": "bool?"},
    "create_workflow_from_template": {"workflow_type": "template", "params": "params"},
    "run_workflow": {"workflow_id": "id", "force": "bool?"},
    "approve": {"workflow_id": "id", "approver": "str?", "acknowledge_not_executed": "bool?"},
    "rollback": {"workflow_id": "id", "confirm": "bool?", "acknowledge_unknown_effects": "bool?"},
    "cancel_workflow": {
        "workflow_id": "id",
        "reason": "str?",
        "confirm": "bool?",
        "acknowledge_unknown_effects": "bool?",
    },
    "review_workflow": {"workflow_id": "id"},
    "get_workflow_status": {"workflow_id": "id"},
    "list_workflows": {"limit": "limit?", "offset": "offset?"},
    "get_skill_catalog": {},
}
TOOLS = list(_SCHEMAS)


@dataclass(frozen=True)
class Known:
    """The n-th workflow the run knows of (modulo how many there are), chosen when the call is made.

    Drawing an index rather than an id keeps generation independent of what earlier examples
    created, which Hypothesis needs to replay and shrink.
    """

    n: int


def resolve(arguments: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """``arguments`` with each ``Known`` replaced by a real workflow id."""
    return {k: ids[v.n % len(ids)] if isinstance(v, Known) and ids else v for k, v in arguments.items()}


def _valid(kind: str) -> st.SearchStrategy[Any]:
    match kind:
        case "id":
            return st.builds(Known, st.integers(0, 63)) | st.sampled_from(["wf-nope", ""])
        case "str":
            return st.text(max_size=40) | st.sampled_from(["restart web tier", "x"])
        case "bool":
            return st.booleans()
        case "steps":
            return steps
        case "template":
            return st.sampled_from([*_TEMPLATE_NAMES, "no_such_template"])
        case "params":
            return template_params
        case "limit":
            return st.none() | st.integers(1, 500)
        case _:
            return st.integers(0, 50)


@st.composite
def arguments_for(draw: st.DrawFn, tool: str) -> dict[str, Any]:
    """Arguments for ``tool``: each present field valid-shaped or hostile, sometimes missing or extra."""
    arguments: dict[str, Any] = {}
    for name, spec in _SCHEMAS[tool].items():
        kind, optional = spec.rstrip("?"), spec.endswith("?")
        presence = draw(st.sampled_from(["valid", "valid", "valid", "hostile", "missing"]))
        if presence == "missing" and (optional or draw(st.booleans())):
            continue
        arguments[name] = draw(hostile if presence == "hostile" else _valid(kind))
    if draw(st.integers(0, 9)) == 0:
        arguments[draw(keys)] = draw(json_values)
    return arguments
