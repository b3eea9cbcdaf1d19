"""The write tools' effects as data: ``effects.yaml`` beside this module, read into typed models.

For each declared tool: the objects it names (an alias, the object kind of ``engine.targets`` and
the parameter holding the name), the conditions that must hold before it runs (``requires``),
the conditions under which it has nothing to do (``nothing_to_do``), what it leaves behind
(``sets``) and what else it changes that the gate does not read (``untracked``). A tool that is
not declared has no known effect: ``safety.predict`` says ``unknown`` for it and never guesses.
The file is read once, on first use; a malformed file is a bug of this package and raises.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any, Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Condition", "Effect", "ObjectRef", "Setting", "ValueSpec", "effect_of", "effects"]

_FILE: Final = "effects.yaml"
_TESTS: Final = ("is", "is_not", "one_of", "contains", "lacks")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ValueSpec(_Strict):
    """A value taken from the step's parameter ``param`` (``default`` when the step leaves it out;
    ``mapping`` turns it into the state's own word, e.g. ``power_on: true`` → ``poweredOn``)."""

    param: str
    default: Any = None
    mapping: dict[Any, Any] | None = Field(default=None, alias="map")


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
    raw = yaml.safe_load(text) or {}
    return {
        skill: {tool: Effect.model_validate(body) for tool, body in tools.items()}
        for skill, tools in raw.items()
    }


def effect_of(skill: str, tool: str) -> Effect | None:
    """The declared effect of ``skill.tool``, or None (not declared: the effect is unknown)."""
    return effects().get(skill, {}).get(tool)
