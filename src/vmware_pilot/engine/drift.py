"""What the gate says about an object that is not as the plan expects, in plain sentences.

The reference point is the object's state when the gate was first shown for the plan as it
stands (``engine.inspection`` keeps it per object, for the current plan digest): Pilot's review
of a plan is structural and reads no object, and the steps before the gate may change the
objects on purpose, so the first state a person could have approved against is the one read
when the run reached the gate. A changed plan is a new plan to review: its reference starts
again. Besides changes since then, the gate says when the object is not found, renamed (found
again by a field that survives a rename) or gone. Whether a step would have nothing to do, or
would meet an object that exists already, is judged step by step against the state the plan
leaves at that point (``safety.predict``), not here. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["changes", "same_state"]

_REMOVES: Final = ("delete_", "remove_", "destroy_")


def _what(entry: Mapping[str, Any]) -> str:
    kind = str(entry.get("kind") or "vm")
    name = str(entry.get("name", ""))
    where = f" on {entry['target']}" if entry.get("target") else ""
    return f"{'VM' if kind == 'vm' else kind} {name}{where}"


def _when(base: Mapping[str, Any] | None) -> str:
    at = str((base or {}).get("at", ""))
    return at[:19].replace("T", " ") + " UTC" if at else "an earlier showing"


def same_state(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """``field old → new`` for each summary field or snapshot list that differs."""
    before, after = dict(a.get("summary") or {}), dict(b.get("summary") or {})
    moved = [
        f"{key} {before.get(key)} → {after.get(key)}"
        for key in list(dict.fromkeys([*before, *after]))
        if before.get(key) != after.get(key)
    ]
    if list(a.get("snapshots") or []) != list(b.get("snapshots") or []):
        moved.append(
            f"snapshots {', '.join(a.get('snapshots') or []) or 'none'} → "
            f"{', '.join(b.get('snapshots') or []) or 'none'}"
        )
    return moved


def changes(
    entry: Mapping[str, Any],
    tools: list[str],
    created_by: list[str],
    base: Mapping[str, Any] | None,
    renamed_to: str = "",
) -> list[str]:
    """The plain sentences for one object: ``entry`` as read now, ``tools`` the released steps that
    name it, ``created_by`` those of them that create it, ``base`` its reference state (None:
    this showing is the reference), ``renamed_to`` the name it was found under by a stable field."""
    what, read = _what(entry), entry.get("read")
    base_read = (base or {}).get("read")
    out: list[str] = []
    if read == "not_found":
        if created_by and not renamed_to:
            return []  # expected: the step creates it (the state line says so)
        removers = [t for t in tools if t.startswith(_REMOVES)]
        nothing = f"; {removers[0]} would have nothing to remove" if removers else ""
        if renamed_to:
            out.append(
                f"RENAMED: the {what} shown at {_when(base)} is now named {renamed_to}; the step still "
                f"names {entry.get('name')}, so it would not find it{nothing}."
            )
        elif base_read == "ok":
            out.append(
                f"GONE: {what} was there when the gate was first shown ({_when(base)}) and is not found "
                f"now: it was deleted or renamed{nothing}."
            )
        else:
            out.append(
                f"NOT FOUND: there is no {what}; it may have been renamed or deleted since the plan "
                f"was written{nothing}."
            )
        return out
    if read != "ok":
        return out  # the state line says the read failed; nothing is claimed about the object
    if base_read == "not_found" and not created_by:
        out.append(f"APPEARED: {what} was not found when the gate was first shown ({_when(base)}).")
    elif base_read == "ok" and base is not None:
        moved = same_state(base, entry)
        if moved:
            out.append(f"CHANGED since the gate was first shown ({_when(base)}): {'; '.join(moved)}.")
    return out
