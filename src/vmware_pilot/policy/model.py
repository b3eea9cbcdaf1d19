"""The policy file's schema and its rules, pure: what a policy is, what a rule matches, which
approval rule is strictest, and when a change window is open.

A policy has four sections (docs/policies.md): ``deny`` (steps refused at every door),
``approvals`` (the least a gate demands of its approvers), ``windows`` (when write and destructive
steps on some targets may run; blackouts when they may not) and ``conflicts`` (what happens when a
workflow writes an object another running workflow holds). ``parse_policy`` turns plain data (the
YAML as read) into a ``Policy`` or raises ``PolicyInvalid`` naming each problem by its path in the
document; ``policy.load`` turns those paths into line numbers. No I/O here, and no clock: the
functions that need the time take it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from fnmatch import fnmatchcase
from typing import Any, Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vmware_pilot.catalog.renames import RENAMES, rename_tool, skill_key
from vmware_pilot.domain.gate_options import MAX_APPROVALS_REQUIRED, MAX_EXPIRES_IN_MINUTES

__all__ = [
    "CONFLICT_MODES",
    "DAYS",
    "EMPTY",
    "TIERS",
    "ApprovalRule",
    "Conflicts",
    "DatedRange",
    "DenyRule",
    "Match",
    "Policy",
    "PolicyInvalid",
    "Problem",
    "Subject",
    "WeeklyRange",
    "Window",
    "applicable_windows",
    "denials",
    "is_open",
    "next_opening",
    "parse_policy",
    "strictest",
]

TIERS: Final = ("destructive", "write", "read", "unknown")
"""Risk tiers a rule may name (safety/classify.py's ``Tier`` values)."""
DAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
CONFLICT_MODES: Final = ("refuse", "wait")
# Tiers a window holds back: everything but reads.
_HELD: Final = frozenset({"destructive", "write", "unknown"})
# How far ahead next_opening looks for a weekly opening before saying "never".
_HORIZON: Final = timedelta(days=400)
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$|^24:00$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_RULES: Final = 500
MAX_GLOBS: Final = 50

Path = tuple[str | int, ...]


# --- problems -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in a policy document: where (``path`` of keys and indexes; ``line`` once
    the loader knows it) and what."""

    path: Path
    message: str
    line: int | None = None

    def where(self) -> str:
        spot = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in self.path).replace(".[", "[")
        return spot or "the document"

    def __str__(self) -> str:
        at = f"line {self.line}: " if self.line is not None else ""
        return f"{at}{self.where()}: {self.message}" if self.path else f"{at}{self.message}"


class PolicyInvalid(ValueError):
    """A policy document that cannot be used; ``problems`` names each problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems) or "invalid policy")


# --- what a rule looks at ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subject:
    """A step as rules see it: its skill and tool (any spelling; compared by current name and every
    pre-2.0 name), the names of the objects and targets it names, and its risk tier."""

    skill: str
    tool: str
    targets: tuple[str, ...] = ()
    tier: str = "unknown"

    @property
    def names(self) -> tuple[str, ...]:
        """``skill.tool`` under the tool's current name and every pre-2.0 name of it."""
        skill = skill_key(self.skill)
        current = rename_tool(skill, self.tool)
        olds = [old for old, new in RENAMES.get(skill, {}).items() if new == current]
        return tuple(f"{skill}.{name}" for name in [current, *olds])


def _tool_glob(text: str) -> str:
    """A ``skill.tool`` glob in one spelling: skill by ``skill_key``, an old literal tool name as
    its current name, a bare tool (no dot) for any skill."""
    text = text.strip()
    if "." not in text:
        return f"*.{text}"
    skill, tool = text.split(".", 1)
    if any(c in skill for c in "*?["):
        return f"{skill.lower()}.{tool}"
    skill = skill_key(skill)
    if not any(c in tool for c in "*?["):
        tool = rename_tool(skill, tool)
    return f"{skill}.{tool}"


@dataclass(frozen=True, slots=True)
class Match:
    """What a rule matches: every given part must match (an absent part matches anything).

    ``tools``: ``skill.tool`` globs (a bare ``tool`` means any skill; pre-2.0 names match too);
    ``targets``: globs over the names a step names (its objects and its ``target``), one
    matching name is enough, and a step naming none does not match; ``risk``: tiers."""

    tools: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    risk: tuple[str, ...] = ()

    def why(self, subject: Subject) -> list[str] | None:
        """Why ``subject`` matches (one phrase per part), or None when it does not."""
        reasons: list[str] = []
        if self.tools:
            names = subject.names
            hit = next((g for g in self.tools for n in names if fnmatchcase(n, g)), None)
            if hit is None:
                return None
            reasons.append(f"tool {names[0]} matches '{hit}'")
        if self.targets:
            pair = next(((t, g) for g in self.targets for t in subject.targets if fnmatchcase(t, g)), None)
            if pair is None:
                return None
            reasons.append(f"target '{pair[0]}' matches '{pair[1]}'")
        if self.risk:
            if subject.tier not in self.risk:
                return None
            reasons.append(f"risk {subject.tier}")
        return reasons or ["matches every step"]

    def matches(self, subject: Subject) -> bool:
        return self.why(subject) is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.tools:
            out["tool"] = list(self.tools)
        if self.targets:
            out["target"] = list(self.targets)
        if self.risk:
            out["risk"] = list(self.risk)
        return out


@dataclass(frozen=True, slots=True)
class DenyRule:
    name: str
    match: Match
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "match": self.match.to_dict(), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """The least a gate releasing a matching step demands. ``approvers`` empty: any role that may
    approve; else only callers holding one of these roles or identity-provider groups."""

    name: str
    match: Match
    quorum: int = 1
    approvers: tuple[str, ...] = ()
    requester_may_approve: bool = True
    max_validity_minutes: float | None = None

    def strictness(self) -> tuple[int, int, int, float]:
        """Larger is stricter: quorum, then the requester excluded, then approvers restricted,
        then a shorter validity."""
        validity = self.max_validity_minutes if self.max_validity_minutes is not None else float("inf")
        return (self.quorum, int(not self.requester_may_approve), int(bool(self.approvers)), -validity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "match": self.match.to_dict(),
            "quorum": self.quorum,
            "approvers": list(self.approvers),
            "requester_may_approve": self.requester_may_approve,
            "max_validity_minutes": self.max_validity_minutes,
        }


# --- windows -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WeeklyRange:
    """On ``days`` from ``start`` to ``end`` local time; ``end`` at or before ``start`` runs into
    the next day; ``end`` 24:00 is midnight at the end of the day."""

    days: tuple[int, ...]  # 0 = Monday
    start: time
    end: time | None  # None: 24:00

    def to_dict(self) -> dict[str, Any]:
        return {
            "days": [DAYS[d] for d in self.days],
            "from": self.start.strftime("%H:%M"),
            "to": self.end.strftime("%H:%M") if self.end is not None else "24:00",
        }


@dataclass(frozen=True, slots=True)
class DatedRange:
    start: datetime  # aware
    end: datetime  # aware, after start

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.start.isoformat(), "to": self.end.isoformat()}


@dataclass(frozen=True, slots=True)
class Window:
    """A change window (matching write and destructive steps run only inside it) or, with
    ``blackout``, a freeze (they never run inside it). Reads always run. ``approvers``: the roles
    or groups that may approve an exception to run outside it (none: no exception)."""

    name: str
    match: Match
    blackout: bool = False
    weekly: tuple[WeeklyRange, ...] = ()
    dates: tuple[DatedRange, ...] = ()
    timezone: str = "UTC"
    approvers: tuple[str, ...] = ()

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def applies_to(self, subject: Subject) -> bool:
        """The window governs ``subject``: it matches and the step is not a read."""
        return subject.tier in _HELD and self.match.matches(subject)

    def periods(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """The window's periods overlapping [start, end), as aware UTC datetimes, sorted."""
        out = [(r.start, r.end) for r in self.dates if r.end > start and r.start < end]
        if self.weekly:
            zone = self.zone
            day = start.astimezone(zone).date() - timedelta(days=1)
            last = end.astimezone(zone).date()
            while day <= last:
                for w in self.weekly:
                    if day.weekday() not in w.days:
                        continue
                    begin = datetime.combine(day, w.start, zone)
                    if w.end is None or w.end <= w.start:
                        finish = datetime.combine(day + timedelta(days=1), w.end or time(0), zone)
                    else:
                        finish = datetime.combine(day, w.end, zone)
                    if finish > start and begin < end:
                        out.append((begin.astimezone(UTC), finish.astimezone(UTC)))
                day += timedelta(days=1)
        return sorted((a.astimezone(UTC), b.astimezone(UTC)) for a, b in out)

    def active(self, at: datetime) -> bool:
        """``at`` falls inside one of the window's periods."""
        return any(a <= at < b for a, b in self.periods(at, at + timedelta(microseconds=1)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "match": self.match.to_dict(), "blackout": self.blackout}
        out["weekly"] = [w.to_dict() for w in self.weekly]
        out["dates"] = [d.to_dict() for d in self.dates]
        out["timezone"] = self.timezone
        out["approvers"] = list(self.approvers)
        return out


@dataclass(frozen=True, slots=True)
class Conflicts:
    """A write step naming an object another running workflow holds: ``refuse`` the run, or
    ``wait`` until the object is free."""

    mode: Literal["refuse", "wait"] = "refuse"

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode}


@dataclass(frozen=True, slots=True)
class Policy:
    deny: tuple[DenyRule, ...] = ()
    approvals: tuple[ApprovalRule, ...] = ()
    windows: tuple[Window, ...] = ()
    conflicts: Conflicts = field(default_factory=Conflicts)

    def canonical(self) -> dict[str, Any]:
        """The policy's meaning as plain data: every default filled in, names canonical."""
        return {
            "deny": [r.to_dict() for r in self.deny],
            "approvals": [r.to_dict() for r in self.approvals],
            "windows": [w.to_dict() for w in self.windows],
            "conflicts": self.conflicts.to_dict(),
        }

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical form: two texts meaning the same have the same digest."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def is_empty(self) -> bool:
        return not (self.deny or self.approvals or self.windows) and self.conflicts == Conflicts()


EMPTY: Final = Policy()


# --- the rules applied -----------------------------------------------------------------------------


def denials(policy: Policy, subject: Subject) -> list[tuple[DenyRule, list[str]]]:
    """Every deny rule matching ``subject``, in file order, with why it matches."""
    out: list[tuple[DenyRule, list[str]]] = []
    for rule in policy.deny:
        why = rule.match.why(subject)
        if why is not None:
            out.append((rule, why))
    return out


def strictest(
    rules: Iterable[ApprovalRule], subjects: Iterable[Subject]
) -> tuple[ApprovalRule, Subject, list[str]] | None:
    """The strictest approval rule matching any of ``subjects`` (a gate's released steps), with the
    step it matched and why; None when none matches. Strictness: ``ApprovalRule.strictness``; a
    tie goes to the rule written first."""
    best: tuple[ApprovalRule, Subject, list[str]] | None = None
    for rule in rules:
        for subject in subjects if isinstance(subjects, Sequence) else list(subjects):
            why = rule.match.why(subject)
            if why is None:
                continue
            if best is None or rule.strictness() > best[0].strictness():
                best = (rule, subject, why)
            break
    return best


def _subjects(target: str | Subject | Iterable[str]) -> Subject:
    if isinstance(target, Subject):
        return target
    names = (target,) if isinstance(target, str) else tuple(target)
    return Subject(skill="", tool="", targets=names, tier="write")


def applicable_windows(windows: Iterable[Window], target: str | Subject | Iterable[str]) -> list[Window]:
    """The windows governing ``target``: a ``Subject`` (a step), or target names (taken as a
    write step naming them; a window matching on ``tool`` or ``risk`` needs a Subject)."""
    subject = _subjects(target)
    return [w for w in windows if w.applies_to(subject)]


def _open(windows: Sequence[Window], at: datetime) -> bool:
    if any(w.blackout and w.active(at) for w in windows):
        return False
    changes = [w for w in windows if not w.blackout]
    return not changes or any(w.active(at) for w in changes)


def is_open(windows: Iterable[Window], target: str | Subject | Iterable[str], at: datetime) -> bool:
    """May a write to ``target`` run at ``at`` (aware)? Not inside a blackout that applies, and
    inside at least one of the change windows that apply, when any does. No window applying:
    always open."""
    return _open(applicable_windows(windows, target), _aware(at))


def next_opening(
    windows: Iterable[Window], target: str | Subject | Iterable[str], at: datetime
) -> datetime | None:
    """The first moment at or after ``at`` when ``is_open`` holds (``at`` itself when open now);
    None when it never opens again (only past dated ranges, or a change window that never
    comes within 400 days)."""
    at = _aware(at).astimezone(UTC)
    governing = applicable_windows(windows, target)
    if _open(governing, at):
        return at
    end = at + _HORIZON
    for w in governing:
        for _, b in w.periods(at, at + timedelta(days=1)):
            end = max(end, b + timedelta(days=1))
        for d in w.dates:
            if d.end > at:
                end = max(end, d.end + timedelta(days=1))
    moments = sorted({m for w in governing for p in w.periods(at, end) for m in p if at < m})
    for moment in moments:
        if _open(governing, moment):
            return moment
    return None


def _aware(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError("a window is judged at an aware datetime (with its UTC offset)")
    return at


# --- parsing -------------------------------------------------------------------------------------


class _Reader:
    """Collects problems while building the policy from plain data."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def fail(self, path: Path, message: str) -> None:
        self.problems.append(Problem(path, message))

    def mapping(self, value: Any, path: Path, allowed: Sequence[str]) -> Mapping[str, Any] | None:
        if not isinstance(value, Mapping):
            self.fail(path, f"must be a mapping with the keys {', '.join(allowed)}")
            return None
        for key in value:
            if key not in allowed:
                self.fail((*path, str(key)), f"unknown key; the keys here are {', '.join(allowed)}")
        return value

    def rules(self, value: Any, path: Path) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, "must be a list of rules")
            return []
        if len(value) > MAX_RULES:
            self.fail(path, f"holds more than {MAX_RULES} rules")
            return []
        return value

    def strings(self, value: Any, path: Path, what: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            self.fail(path, f"must be {what} or a non-empty list of them")
            return ()
        if len(items) > MAX_GLOBS:
            self.fail(path, f"holds more than {MAX_GLOBS} entries")
            return ()
        out: list[str] = []
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item.strip() or len(item) > 200:
                self.fail((*path, i) if not isinstance(value, str) else path, f"must be {what}")
            else:
                out.append(item.strip())
        return tuple(out)

    def name(self, raw: Mapping[str, Any], path: Path, default: str, taken: set[str]) -> str:
        if "name" not in raw:
            return default
        value = raw["name"]
        if not isinstance(value, str) or not _NAME.match(value):
            self.fail(
                (*path, "name"), "must be a name: a letter or digit, then letters, digits, '.', '_' or '-'"
            )
            return default
        if value in taken:
            self.fail((*path, "name"), f"the name '{value}' is used twice")
        taken.add(value)
        return value

    def match(self, value: Any, path: Path, *, required: bool = True) -> Match:
        if value is None and not required:
            return Match()
        raw = self.mapping(value, path, ("tool", "target", "risk"))
        if raw is None:
            return Match()
        tools = self.strings(raw["tool"], (*path, "tool"), "a 'skill.tool' glob") if "tool" in raw else ()
        targets = (
            self.strings(raw["target"], (*path, "target"), "a target-name glob") if "target" in raw else ()
        )
        risk = (
            self.strings(raw["risk"], (*path, "risk"), f"a risk tier ({', '.join(TIERS)})")
            if "risk" in raw
            else ()
        )
        for i, tier in enumerate(risk):
            if tier not in TIERS:
                spot = (*path, "risk", i) if isinstance(raw["risk"], list) else (*path, "risk")
                self.fail(spot, f"'{tier[:40]}' is not a risk tier; the tiers are {', '.join(TIERS)}")
        for i, glob in enumerate(tools):
            if glob.count(".") > 1 or glob.startswith(".") or glob.endswith("."):
                spot = (*path, "tool", i) if isinstance(raw["tool"], list) else (*path, "tool")
                self.fail(spot, "must be 'skill.tool' (globs allowed) or a bare tool name")
        return Match(tuple(_tool_glob(t) for t in tools), targets, risk)

    def boolean(self, raw: Mapping[str, Any], key: str, path: Path, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self.fail((*path, key), "must be true or false")
            return default
        return value

    def deny(self, value: Any) -> tuple[DenyRule, ...]:
        out: list[DenyRule] = []
        taken: set[str] = set()
        for i, item in enumerate(self.rules(value, ("deny",))):
            path: Path = ("deny", i)
            raw = self.mapping(item, path, ("name", "match", "reason"))
            if raw is None:
                continue
            name = self.name(raw, path, f"deny[{i}]", taken)
            if "match" not in raw:
                self.fail(path, "needs 'match' (what it denies)")
            match = self.match(raw.get("match"), (*path, "match"), required=False)
            reason = raw.get("reason")
            if not isinstance(reason, str) or not reason.strip() or len(reason) > 500:
                self.fail((*path, "reason"), "needs a reason: a text of at most 500 characters saying why")
                reason = ""
            out.append(DenyRule(name, match, reason.strip()))
        return tuple(out)

    def approvals(self, value: Any) -> tuple[ApprovalRule, ...]:
        keys = ("name", "match", "quorum", "approvers", "requester_may_approve", "max_validity_minutes")
        out: list[ApprovalRule] = []
        taken: set[str] = set()
        for i, item in enumerate(self.rules(value, ("approvals",))):
            path: Path = ("approvals", i)
            raw = self.mapping(item, path, keys)
            if raw is None:
                continue
            name = self.name(raw, path, f"approvals[{i}]", taken)
            match = self.match(raw.get("match"), (*path, "match"), required=False)
            quorum = raw.get("quorum", 1)
            if (
                isinstance(quorum, bool)
                or not isinstance(quorum, int)
                or not 1 <= quorum <= MAX_APPROVALS_REQUIRED
            ):
                self.fail((*path, "quorum"), f"must be a whole number from 1 to {MAX_APPROVALS_REQUIRED}")
                quorum = 1
            approvers: tuple[str, ...] = ()
            if raw.get("approvers") is not None:
                approvers = self.strings(raw["approvers"], (*path, "approvers"), "a role or group name")
            may = self.boolean(raw, "requester_may_approve", path, True)
            validity = raw.get("max_validity_minutes")
            if validity is not None and (
                isinstance(validity, bool)
                or not isinstance(validity, int | float)
                or not 0 < validity <= MAX_EXPIRES_IN_MINUTES
            ):
                self.fail(
                    (*path, "max_validity_minutes"),
                    f"must be a number of minutes above 0 and at most {MAX_EXPIRES_IN_MINUTES}",
                )
                validity = None
            out.append(
                ApprovalRule(
                    name, match, quorum, approvers, may, float(validity) if validity is not None else None
                )
            )
        return tuple(out)

    def clock(self, value: Any, path: Path) -> tuple[time | None, bool]:
        """(time, ok); 24:00 is (None, True)."""
        if not isinstance(value, str) or not _HHMM.match(value.strip()):
            self.fail(path, "must be a time of day as 'HH:MM' (00:00 to 24:00), quoted")
            return None, False
        text = value.strip()
        if text == "24:00":
            return None, True
        return time(int(text[:2]), int(text[3:])), True

    def weekly(self, value: Any, path: Path) -> tuple[WeeklyRange, ...]:
        if not isinstance(value, list) or not value:
            self.fail(path, "must be a non-empty list of {days, from, to}")
            return ()
        out: list[WeeklyRange] = []
        for i, item in enumerate(value[:MAX_GLOBS]):
            spot: Path = (*path, i)
            raw = self.mapping(item, spot, ("days", "from", "to"))
            if raw is None:
                continue
            names = self.strings(raw.get("days"), (*spot, "days"), f"a day ({', '.join(DAYS)})")
            days: list[int] = []
            for day in names:
                key = day.lower()[:3]
                if day.lower() not in (key, _LONG_DAYS.get(key)) or key not in DAYS:
                    self.fail((*spot, "days"), f"'{day[:20]}' is not a day; the days are {', '.join(DAYS)}")
                else:
                    days.append(DAYS.index(key))
            start, ok_start = self.clock(raw.get("from"), (*spot, "from"))
            end, ok_end = self.clock(raw.get("to"), (*spot, "to"))
            if ok_start and start is None:
                self.fail((*spot, "from"), "a range starts at 23:59 at the latest")
                ok_start = False
            if ok_start and ok_end and days and start is not None:
                if end == start:
                    self.fail(
                        (*spot, "to"), "must differ from 'from' (for a whole day, write 00:00 to 24:00)"
                    )
                out.append(WeeklyRange(tuple(sorted(set(days))), start, end))
        return tuple(out)

    def instant(self, value: Any, path: Path, zone: ZoneInfo | None) -> datetime | None:
        if isinstance(value, datetime):
            moment = value
        elif isinstance(value, date):
            moment = datetime.combine(value, time(0))
        elif isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value.strip())
            except ValueError:
                self.fail(
                    path, "must be a date or date and time in ISO 8601, e.g. '2026-12-20T00:00:00+01:00'"
                )
                return None
        else:
            self.fail(path, "must be a date or date and time in ISO 8601, e.g. '2026-12-20T00:00:00+01:00'")
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone or UTC)
        return moment.astimezone(UTC)

    def dates(self, value: Any, path: Path, zone: ZoneInfo | None) -> tuple[DatedRange, ...]:
        if not isinstance(value, list) or not value:
            self.fail(path, "must be a non-empty list of {from, to}")
            return ()
        out: list[DatedRange] = []
        for i, item in enumerate(value[:MAX_RULES]):
            spot: Path = (*path, i)
            raw = self.mapping(item, spot, ("from", "to"))
            if raw is None:
                continue
            start = self.instant(raw.get("from"), (*spot, "from"), zone)
            finish = self.instant(raw.get("to"), (*spot, "to"), zone)
            if start is not None and finish is not None:
                if finish <= start:
                    self.fail((*spot, "to"), "must be after 'from'")
                else:
                    out.append(DatedRange(start, finish))
        return tuple(out)

    def windows(self, value: Any) -> tuple[Window, ...]:
        keys = ("name", "match", "blackout", "weekly", "dates", "timezone", "approvers")
        out: list[Window] = []
        taken: set[str] = set()
        for i, item in enumerate(self.rules(value, ("windows",))):
            path: Path = ("windows", i)
            raw = self.mapping(item, path, keys)
            if raw is None:
                continue
            name = self.name(raw, path, f"windows[{i}]", taken)
            match = self.match(raw.get("match"), (*path, "match"), required=False)
            blackout = self.boolean(raw, "blackout", path, False)
            tz_name = raw.get("timezone", "UTC")
            zone: ZoneInfo | None = None
            if not isinstance(tz_name, str) or not tz_name.strip():
                self.fail((*path, "timezone"), "must be an IANA time zone name, e.g. Europe/Berlin")
                tz_name = "UTC"
            else:
                try:
                    zone = ZoneInfo(tz_name.strip())
                    tz_name = tz_name.strip()
                except (ZoneInfoNotFoundError, ValueError):
                    self.fail((*path, "timezone"), f"'{tz_name[:60]}' is not a known IANA time zone")
                    tz_name = "UTC"
            weekly = self.weekly(raw["weekly"], (*path, "weekly")) if "weekly" in raw else ()
            dates = self.dates(raw["dates"], (*path, "dates"), zone) if "dates" in raw else ()
            if "weekly" not in raw and "dates" not in raw:
                self.fail(path, "needs 'weekly' or 'dates' (when the window is)")
            approvers: tuple[str, ...] = ()
            if raw.get("approvers") is not None:
                approvers = self.strings(raw["approvers"], (*path, "approvers"), "a role or group name")
            out.append(Window(name, match, blackout, weekly, dates, tz_name, approvers))
        return tuple(out)

    def conflicts(self, value: Any) -> Conflicts:
        if value is None:
            return Conflicts()
        raw = self.mapping(value, ("conflicts",), ("mode",))
        if raw is None:
            return Conflicts()
        mode = raw.get("mode", "refuse")
        if mode not in CONFLICT_MODES:
            self.fail(("conflicts", "mode"), "must be 'refuse' or 'wait'")
            return Conflicts()
        return Conflicts(mode)


_LONG_DAYS: Final = {
    "mon": "monday",
    "tue": "tuesday",
    "wed": "wednesday",
    "thu": "thursday",
    "fri": "friday",
    "sat": "saturday",
    "sun": "sunday",
}
_SECTIONS: Final = ("version", "deny", "approvals", "windows", "conflicts")


def parse_policy(data: Any) -> Policy:
    """The policy in ``data`` (a YAML document as read: None or a mapping of the four sections,
    and an optional ``version: 1``); PolicyInvalid naming every problem by its path."""
    if data is None:
        return EMPTY
    reader = _Reader()
    raw = reader.mapping(data, (), _SECTIONS)
    if raw is None:
        raise PolicyInvalid(reader.problems)
    if raw.get("version", 1) != 1:
        reader.fail(("version",), "must be 1 (the only policy format so far)")
    policy = Policy(
        deny=reader.deny(raw.get("deny")),
        approvals=reader.approvals(raw.get("approvals")),
        windows=reader.windows(raw.get("windows")),
        conflicts=reader.conflicts(raw.get("conflicts")),
    )
    if reader.problems:
        raise PolicyInvalid(reader.problems)
    return policy
