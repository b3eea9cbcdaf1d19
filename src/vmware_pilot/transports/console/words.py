"""Plain words for people on console pages: what a step found, what a skill said it would do,
what a workflow changed, and how a workflow's state reads at a glance.

The engine's records are written for clients and the audit trail; these sentences are for the
person at the screen. Sentences a skill addresses to the agent driving it ("decide with the
user") are left out, since the person reading is that user.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vmware_pilot.engine.gateview import ReleasedStep, StepPreview

__all__ = [
    "StateLook",
    "change_lines",
    "evidence_line",
    "for_people",
    "preview_line",
    "state_look",
]

_MAX: Final = 240
# Keys of a list envelope that count, page or advise rather than say what was found.
_BOOKKEEPING: Final = frozenset(
    {"returned", "limit", "offset", "total", "truncated", "hint", "mode", "next_offset", "count"}
)
_NAME_KEYS: Final = ("name", "vm", "vm_name", "alarm", "entity", "host", "datastore", "id")
# What a skill addresses to the agent that calls it: a clause after a dash ("… — decide with the
# user") and a whole sentence naming the user or telling the agent to call again. Each is found
# with a literal search in one sentence at a time, never a backtracking scan of the whole text.
_SENTENCE: Final = re.compile(r"[^.!?]*[.!?]?")
_DASH: Final = re.compile(r"([—–])")
_CLAUSE_TO_AGENT: Final = re.compile(r"\bwith the user\b", re.IGNORECASE)
_SENTENCE_TO_AGENT: Final = re.compile(r"\b(?:the user|call it again|confirm=True)\b", re.IGNORECASE)


def _without_clause(sentence: str) -> str:
    """``sentence`` cut before the first dash-led clause that speaks of "with the user"."""
    body, end = (sentence[:-1], sentence[-1]) if sentence[-1:] in (".", "!", "?") else (sentence, "")
    parts = _DASH.split(body)  # text, dash, text, dash, …
    kept = parts[0]
    for dash, clause in zip(parts[1::2], parts[2::2], strict=True):
        if _CLAUSE_TO_AGENT.search(clause):
            return kept.rstrip() + end
        kept += dash + clause
    return kept + end


def for_people(text: str) -> str:
    """``text`` without what a skill addresses to its agent ("… — decide with the user")."""
    kept = []
    for sentence in _SENTENCE.findall(text):
        said = _without_clause(sentence) if sentence else ""
        if said and not _SENTENCE_TO_AGENT.search(said):
            kept.append(said)
    return " ".join("".join(kept).split())


def _short(text: str, limit: int = _MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _name(item: Any) -> str:
    if isinstance(item, Mapping):
        return next((str(item[k]) for k in _NAME_KEYS if item.get(k)), "")
    return str(item) if isinstance(item, str | int | float) else ""


def _noun(key: str, tool: str) -> str:
    if key not in ("items", "results", "data"):
        return key.replace("_", " ")
    for prefix in ("list_", "get_", "find_", "search_"):
        if tool.startswith(prefix):
            return tool[len(prefix) :].replace("_", " ")
    return "items"


def _listing(key: str, items: list[Any], envelope: Mapping[str, Any], tool: str) -> str:
    noun = _noun(key, tool)
    if not items:
        return f"Found no {noun}."
    names = [n for n in (_name(i) for i in items[:3]) if n]
    rest = len(items) - len(names)
    shown = ", ".join(names) + (f" and {rest} more" if names and rest > 0 else "")
    total = envelope.get("total")
    of_total = (
        f" (showing {len(items)} of {total})"
        if isinstance(total, int) and total > len(items)
        else " (more exist than were read)"
        if envelope.get("truncated") is True
        else ""
    )
    return f"Found {len(items)} {noun}{of_total}" + (f": {shown}." if names else ".")


def evidence_line(result: Any, tool: str = "") -> str:
    """What a step's ``result`` found, in one bounded sentence (never the envelope's counters)."""
    if result is None:
        return "Nothing recorded."
    if isinstance(result, Mapping) and len(result) == 1:
        (only,) = result.values()
        if isinstance(only, Mapping):
            result = only
    if isinstance(result, Mapping):
        if result.get("error"):
            return _short(f"Failed: {result['error']}")
        lists = [(k, v) for k, v in result.items() if isinstance(v, list)]
        if len(lists) == 1:
            return _short(_listing(lists[0][0], lists[0][1], result, tool))
        facts = [
            f"{k.replace('_', ' ')}: {v}"
            for k, v in result.items()
            if k not in _BOOKKEEPING and isinstance(v, str | int | float | bool) and v != ""
        ]
        if facts:
            said = "; ".join(facts[:5]) + ("; …" if len(facts) > 5 else "")
            return _short(said if said.endswith((".", "!", "?", "…")) else said + ".")
        if lists:
            return _short(" ".join(_listing(k, v, result, tool) for k, v in lists))
        return "Answered with no details."
    if isinstance(result, list):
        return _short(_listing("items", result, {}, tool))
    return _short(str(result))


def _skill(name: str) -> str:
    return name if name.startswith("vmware-") or name == "pilot" else f"vmware-{name}"


def preview_line(step: ReleasedStep, preview: StepPreview) -> str:
    """What the skill said approving this step would do, for a person (agent-speak left out)."""
    said = for_people(preview.summary)
    skill = _skill(step.skill)
    if preview.status == "previewed":
        return f"{skill} says it would: {said}"
    if preview.status == "refused":
        return f"{skill} would refuse it: {said}"
    if preview.status == "failed":
        return f"Asking {skill} what it would do failed: {said}"
    if preview.status == "no_preview":
        return f"{skill} cannot say in advance what it would do: {said}"
    return said


_CHANGE_LISTS: Final = (
    ("changed", "Changed by Pilot"),
    ("rolled_back", "Undone by a rollback"),
    ("handed_out", "Handed to the agent to perform"),
    ("reported_done", "Reported done by the agent"),
)


def _steps(entries: list[Any]) -> str:
    said = [
        f"step {e.get('index')} ({e.get('tool', '')}" + (f" on {e['object']})" if e.get("object") else ")")
        for e in entries
        if isinstance(e, Mapping)
    ]
    return ", ".join(said)


def change_lines(report: Mapping[str, Any]) -> list[str]:
    """The workflow's changes (``diff_report``) for people: only what is there, a step running now
    told as running (not as "unknown effect")."""
    lines = [
        f"{label}: {_steps(report[key])}."
        for key, label in _CHANGE_LISTS
        if isinstance(report.get(key), list) and report[key]
    ]
    unknown = [e for e in report.get("unknown_effects") or [] if isinstance(e, Mapping)]
    running = [e for e in unknown if e.get("status") == "running"]
    unclear = [e for e in unknown if e.get("status") != "running"]
    if running:
        lines.append(f"Running now: {_steps(running)}.")
    if unclear:
        lines.append(f"Effect not known (interrupted; check the target system): {_steps(unclear)}.")
    if not lines:
        lines.append("Nothing changed yet.")
    return lines


@dataclass(frozen=True)
class StateLook:
    """How a workflow's state reads at a glance: words, an icon and a colour class, never colour alone."""

    text: str
    icon: str
    css: str


_LOOKS: Final = {
    "awaiting_approval": StateLook("Waiting for approval", "◷", "waiting"),
    "expired": StateLook("Expired", "⌛", "expired"),
    "running": StateLook("Running", "▶", "running"),
    "completed": StateLook("Completed", "✔", "completed"),
    "failed": StateLook("Failed", "✖", "failed"),
    "rolled_back": StateLook("Rolled back", "↩", "rolled-back"),
    "rolling_back": StateLook("Rolling back", "↺", "running"),
    "cancelled": StateLook("Cancelled", "⊘", "cancelled"),
    "pending": StateLook("Not started", "○", "pending"),
    "draft": StateLook("Draft", "✎", "pending"),
}


def state_look(state: str, expired: bool = False) -> StateLook:
    if expired and state == "awaiting_approval":
        return _LOOKS["expired"]
    return _LOOKS.get(state, StateLook(state.replace("_", " ").capitalize(), "•", "pending"))
