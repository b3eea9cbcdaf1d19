"""The rule driver (``safety.rules``): a rule needs a docstring, ``every`` keeps list order,
``first`` stops at the first answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vmware_pilot.safety.rules import every, first, rule


@rule("small")
def _small(n: int) -> Iterator[str]:
    """Numbers below 10."""
    if n < 10:
        yield f"{n} is small"


@rule("even")
def _even(n: int) -> Iterator[str]:
    """Even numbers."""
    if n % 2 == 0:
        yield f"{n} is even"


@rule("sign")
def _sign(n: int) -> str | None:
    """Negative numbers."""
    return "negative" if n < 0 else None


@rule("zero")
def _zero(n: int) -> str | None:
    """Zero and below."""
    return "not positive" if n <= 0 else None


def test_a_rule_has_its_name_and_docstring() -> None:
    assert (_small.name, _small.doc) == ("small", "Numbers below 10.")
    assert list(_small(3)) == ["3 is small"]


def test_a_rule_without_a_docstring_is_refused() -> None:
    with pytest.raises(TypeError, match="'quiet' needs a docstring"):

        @rule("quiet")
        def _quiet(n: int) -> None:
            return None


def test_every_yields_rule_by_rule_in_list_order() -> None:
    assert list(every((_small, _even), 4)) == ["4 is small", "4 is even"]
    assert list(every((_even, _small), 4)) == ["4 is even", "4 is small"]
    assert list(every((_small, _even), 11)) == []


def test_first_returns_the_first_answer_in_list_order() -> None:
    assert first((_sign, _zero), -1) == "negative"
    assert first((_zero, _sign), -1) == "not positive"
    assert first((_sign, _zero), 0) == "not positive"
    assert first((_sign, _zero), 5) is None
