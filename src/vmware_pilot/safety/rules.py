"""Rules as data: each rule is a name, a docstring saying what it checks, and a small function.

The review (``safety.review``), the rollback and cancel previews (``safety.blast``) and the
judging of a skill's answer (``dispatch.judge``) are ordered lists of such rules run by a tiny
driver: ``every`` collects what each rule yields, in list order; ``first`` returns the first
answer a rule gives. The order of a list is part of the contract (findings come out in it), so
adding a rule means choosing its place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Rule", "every", "first", "rule"]

S = TypeVar("S")
R = TypeVar("R")
T = TypeVar("T")  # the item a rule yields


@dataclass(frozen=True, slots=True)
class Rule(Generic[S, R]):
    """``check(subject)`` answers for one subject; ``doc`` says what the rule checks."""

    name: str
    doc: str
    check: Callable[[S], R]

    def __call__(self, subject: S) -> R:
        return self.check(subject)


def rule(name: str) -> Callable[[Callable[[S], R]], Rule[S, R]]:
    """Decorator: the function becomes a ``Rule`` named ``name``, documented by its docstring
    (required: a rule nobody can read is a rule nobody can review)."""

    def make(check: Callable[[S], R]) -> Rule[S, R]:
        doc = inspect.getdoc(check)
        if not doc:
            raise TypeError(f"rule {name!r} needs a docstring saying what it checks")
        return Rule(name, doc, check)

    return make


def every(rules: Sequence[Rule[S, Iterator[T]]], subject: S) -> Iterator[T]:
    """What every rule yields for ``subject``, rule by rule in list order."""
    for r in rules:
        yield from r.check(subject)


def first(rules: Sequence[Rule[S, R | None]], subject: S) -> R | None:
    """The answer of the first rule that gives one (not None) for ``subject``, or None."""
    for r in rules:
        answer = r.check(subject)
        if answer is not None:
            return answer
    return None
