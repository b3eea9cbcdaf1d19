"""Keep every refusal small, whatever the caller sent.

A refusal (a payload with a truthy ``error`` and no ``outcome``) quotes at most ``QUOTE_CHARS``
characters of any string the caller sent, and its JSON text is at most ``MAX_REFUSAL_BYTES``
bytes. Most refusals already are; ``bound_refusal`` is the net under all of them: it cuts the caller's long strings
wherever they appear in the refusal's texts, then, only if the refusal is still too big, cuts long
texts and lists (saying so with ``"truncated": true``), and as a last resort keeps only
``error`` and ``hint``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Final

from vmware_pilot.errors import QUOTE_CHARS, excerpt

__all__ = ["MAX_REFUSAL_BYTES", "bound_refusal", "long_strings"]

MAX_REFUSAL_BYTES: Final = 4096
# The most of the caller's long strings searched for in a refusal (the longest first); shorter
# ones that are missed are still cut by the per-text cap below.
_MAX_SEARCHED: Final = 256
# No single text in a refusal is longer than this, even when the whole refusal fits.
_TEXT_CAP: Final = 2000
# (characters per text, items per list) tried in turn while the refusal is too big.
_SQUEEZES: Final = ((400, 10), (160, 3), (60, 1))


def long_strings(value: object) -> list[str]:
    """The distinct strings (values and keys) in ``value`` longer than ``QUOTE_CHARS``, longest first."""
    found: set[str] = set()
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > QUOTE_CHARS:
                found.add(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return sorted(found, key=len, reverse=True)[:_MAX_SEARCHED]


def _size(payload: Mapping[str, Any]) -> int:
    return len(json.dumps(payload, indent=2, ensure_ascii=False, default=str).encode())


def _rebuild(value: Any, text: Callable[[str], str], items: int | None = None) -> Any:
    """``value`` with ``text`` applied to every string and lists cut to ``items`` (None: all)."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, Mapping):
        return {text(str(k)): _rebuild(v, text, items) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rebuild(v, text, items) for v in (value if items is None else value[:items])]
    return value


def bound_refusal(
    payload: Mapping[str, Any], inputs: Iterable[str] = (), *, squeeze: bool = True
) -> dict[str, Any]:
    """``payload`` with the caller's ``inputs`` quoted at most ``QUOTE_CHARS`` long and within 4 KiB.

    ``inputs`` are the caller's long strings (``long_strings(arguments)``). A payload that needed
    no cutting comes back equal to itself. ``squeeze=False`` only cuts quoted inputs and overlong
    texts (for results that carry an error, whose size is the size of the plan).
    """
    searched = [s for s in inputs if len(s) > QUOTE_CHARS]

    def unquote(text: str) -> str:
        if len(text) > QUOTE_CHARS:
            for s in searched:
                if len(s) <= len(text) and s in text:
                    text = text.replace(s, excerpt(s))
        return excerpt(text, _TEXT_CAP)

    out: dict[str, Any] = _rebuild(payload, unquote)
    if not squeeze or _size(out) <= MAX_REFUSAL_BYTES:
        return out
    for chars, items in _SQUEEZES:
        squeezed: dict[str, Any] = _rebuild(out, partial(excerpt, limit=chars), items)
        squeezed["truncated"] = True
        if _size(squeezed) <= MAX_REFUSAL_BYTES:
            return squeezed
    return {
        "error": excerpt(str(out.get("error") or "refused"), 1000),
        "hint": excerpt(str(out.get("hint", "")), 1000),
        "truncated": True,
    }
