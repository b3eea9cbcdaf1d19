"""The write tools' effects as data: ``effects.json`` beside this module, read into typed models.

For each declared tool (``{skill: {tool: …}}``):

- ``objects``: alias → ``{kind, param}``, the objects the step names (the kinds of
  ``engine.targets``) and the parameter holding the name; a parameter holding a list names one
  object per item;
- ``requires``: conditions that must hold before it runs, or it fails (or, for a tool with a
  ``confirm`` preview, the skill refuses it);
- ``nothing_to_do``: conditions that, all holding, make it a no-op;
- ``sets``: what it leaves: ``{field: "alias.f", to: value | add: value | remove: value |
  unknown: why}``; a value ``{param: p, default: d, map: {…}}`` takes the step's parameter (a
  parameter the step leaves out, with no default, leaves the field untouched);
- ``untracked``: what else it changes that the gate does not read.

A condition is ``{field: "alias.f" | param: p, is | is_not | one_of | contains | lacks: value,
when: {param, is, default}, says: text}``. A tool that is not declared has no known effect:
``safety.predict`` says ``unknown`` for it and never guesses. JSON, so serving loads no YAML
parser; the file is read once, on first use, and a malformed file is a bug of this package.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Condition", "Effect", "ObjectRef", "Setting", "ValueSpec", "effect_of", "effects"]

_FILE: Final = "effects.json"
_TESTS: Final = ("is", "is_not", "one_of", "contains", "lacks")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ValueSpec(_Strict):
    """A value taken from the step's parameter ``param`` (``default`` when the step leaves it out;
    ``mapping`` turns it into the state's own word, e.g. ``power_on: true`` → ``poweredOn``: its
    keys are JSON text, so ``true``, not ``True``)."""

    param: str
    default: Any = None
    mapping: dict[str, Any] | None = Field(default=None, alias="map")

    def mapped(self, value: Any) -> Any:
        """``value`` in the state's own word (unchanged when the mapping does not name it)."""
        if self.mapping is None:
            return value
        return self.mapping.get(json.dumps(value) if isinstance(value, bool) else str(value), value)


Value = ValueSpec | str | int | float | bool | list[Any] | None


class When(_Strict):
    """The condition or setting applies only when parameter ``param`` is ``is_`` (``default``
    standing in when the step leaves it out)."""

    param: str
    is_: Any = Field(alias="is")
    default: Any = None


class Condition(_Strict):
    """One test on an object's field (``field`` = ``alias.field``) or on a step parameter."""

    field: str = ""
    param: str = ""
    is_: Value = Field(default=None, alias="is")
    is_not: Value = None
    one_of: list[Any] | None = None
    contains: Value = None
    lacks: Value = None
    when: When | None = None
    says: str = ""
    # Which test it is (the first of ``_TESTS`` the entry names).
    test: str = ""

    @model_validator(mode="before")
    @classmethod
    def _which(cls, data: Any) -> Any:
        if isinstance(data, dict):
            named = [t for t in _TESTS if t in data]
            if len(named) != 1 or bool(data.get("field")) == bool(data.get("param")):
                raise ValueError(f"a condition names one field or param and one test of {_TESTS}: {data}")
            data = {**data, "test": named[0]}
        return data

    def expected(self) -> Value:
        return {
            "is": self.is_,
            "is_not": self.is_not,
            "one_of": self.one_of,
            "contains": self.contains,
            "lacks": self.lacks,
        }[self.test]


class Setting(_Strict):
    """What a step leaves in ``field`` (``alias.field``): a value, an item added to or removed
    from a list, or ``unknown`` (with why)."""

    field: str
    to: Value = None
    add: Value = None
    remove: Value = None
    unknown: str = ""
    when: When | None = None
    how: str = ""

    @model_validator(mode="before")
    @classmethod
    def _which(cls, data: Any) -> Any:
        if isinstance(data, dict):
            named = [k for k in ("to", "add", "remove", "unknown") if k in data]
            if len(named) != 1:
                raise ValueError(f"a setting names one of to, add, remove, unknown: {data}")
            data = {**data, "how": named[0]}
        return data


class ObjectRef(_Strict):
    kind: str
    param: str


class Effect(_Strict):
    objects: dict[str, ObjectRef] = Field(default_factory=dict)
    requires: tuple[Condition, ...] = ()
    nothing_to_do: tuple[Condition, ...] = ()
    sets: tuple[Setting, ...] = ()
    untracked: str = ""

    @model_validator(mode="after")
    def _aliases(self) -> Effect:
        fields = [c.field for c in (*self.requires, *self.nothing_to_do) if c.field]
        fields += [s.field for s in self.sets]
        for name in fields:
            alias, dot, rest = name.partition(".")
            if not dot or not rest or alias not in self.objects:
                raise ValueError(f"field {name!r} names no object of {sorted(self.objects)}")
        return self


@functools.cache
def effects() -> dict[str, dict[str, Effect]]:
    """Every declared effect: ``{skill: {tool: Effect}}``."""
    text = resources.files(__package__).joinpath(_FILE).read_text(encoding="utf-8")
    raw = json.loads(text)
    return {
        skill: {tool: Effect.model_validate(body) for tool, body in tools.items()}
        for skill, tools in raw.items()
        if not skill.startswith("_")
    }


def effect_of(skill: str, tool: str) -> Effect | None:
    """The declared effect of ``skill.tool``, or None (not declared: the effect is unknown)."""
    return effects().get(skill, {}).get(tool)
