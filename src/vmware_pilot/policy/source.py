"""Where the policy in force comes from: the policy file (``PolicyFile``), or (a database URL is
set) the database's policy row, shared by every replica (``policy_rows``): one ``kept.TextSource``.

``PolicySource.current()`` is asked at every door; it re-reads the file when its size or time
changed (the row when its digest changed) and parses a text once per change. A text that
cannot be used after start-up is logged once and the last usable policy stays in force, so an
edit half-way through never lifts a rule; ``check()`` raises at start-up instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Final, Protocol

from vmware_pilot.errors import StartupRefused
from vmware_pilot.kept import DatabaseTexts, TextSource
from vmware_pilot.policy.model import EMPTY, Policy, PolicyInvalid

__all__ = ["POLICY_KEY", "PolicyFile", "PolicyRows", "PolicySource", "policy_rows", "startup_refusal"]

_log = logging.getLogger(__name__)


def startup_refusal(exc: PolicyInvalid, where: str) -> StartupRefused:
    """The start-up refusal for a policy that cannot be used: every problem, by line."""
    problems = "; ".join(str(p) for p in exc.problems[:20])
    more = f" (and {len(exc.problems) - 20} more)" if len(exc.problems) > 20 else ""
    return StartupRefused(
        f"the policy in {where} cannot be used: {problems}{more}",
        hint="fix it (`vmware-pilot policy check FILE` lists every problem by line; docs/policies.md "
        "describes the file).",
        problems=[{"line": p.line, "where": p.where(), "problem": p.message} for p in exc.problems[:50]],
    )


class PolicyRows(Protocol):
    """The stored policy (``store.texts.PolicyRow``): one row of YAML text and the digest of its meaning."""

    def policy_row(self) -> tuple[str, str, str, str] | None: ...
    def policy_stamp(self) -> str | None: ...
    def put_policy(self, body: str, digest: str, by: str) -> None: ...


# The one key the policy is kept under (``kept.TextSource``), and the stamp of no policy kept.
POLICY_KEY: Final = "policy"
_NONE_KEPT: Final = "absent"


class PolicyFile:
    """The policy file as a ``kept.TextSource``: one text, stamped with the file's time, size and
    inode (no stamp while there is no file)."""

    in_database = False

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def where(self) -> str:
        return str(self.path)

    def stamps(self) -> list[tuple[str, object]]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return []
        except OSError as exc:
            return [(POLICY_KEY, f"unreadable:{exc.errno}")]
        return [(POLICY_KEY, (info.st_mtime_ns, info.st_size, info.st_ino))]

    def read(self, key: str) -> str | None:
        """The file's text; PolicyInvalid when it cannot be read."""
        from vmware_pilot.policy.load import read_policy_text

        return read_policy_text(self.path)

    def read_many(self, keys: Collection[str]) -> dict[str, str]:
        return {k: text for k in keys if (text := self.read(k)) is not None}

    def put(self, key: str, text: str, previous: str | None, by: str) -> bool:
        raise ValueError("the policy is a file here; edit it")

    def delete(self, key: str, previous: str | None = None) -> bool:
        raise ValueError("the policy is a file here; edit it")


def policy_rows(rows: PolicyRows) -> DatabaseTexts:
    """The database's policy row as a ``kept.TextSource`` (stamped with its digest)."""

    def stamped() -> list[tuple[str, str]]:
        stamp = rows.policy_stamp()
        return [] if stamp is None else [(POLICY_KEY, stamp)]

    def texts(_: str | None) -> list[tuple[str, str]]:
        row = rows.policy_row()
        return [] if row is None else [(POLICY_KEY, row[0])]

    def put(_: str, text: str, previous: str | None, by: str) -> bool:
        from vmware_pilot.policy.load import policy_from_text

        rows.put_policy(text, policy_from_text(text).digest, by)
        return True

    return DatabaseTexts(stamped, texts, put)


class PolicySource:
    """The policy in force, kept in one ``kept.TextSource``: ``path``'s file, or ``rows``' row
    when given."""

    def __init__(self, path: Path, rows: PolicyRows | None = None) -> None:
        self.path = path
        self.source: TextSource = PolicyFile(path) if rows is None else policy_rows(rows)
        self._lock = threading.Lock()
        self._stamp: object = None
        self._policy: Policy = EMPTY
        self._bad: object = None

    @property
    def where(self) -> str:
        return self.source.where

    @property
    def in_database(self) -> bool:
        return self.source.in_database

    def _current_stamp(self) -> object:
        """The stamp of the policy kept now (``_NONE_KEPT`` when there is none)."""
        return dict(self.source.stamps()).get(POLICY_KEY, _NONE_KEPT)

    def _read(self) -> tuple[object, Policy]:
        """(stamp, policy) as kept now; PolicyInvalid when it cannot be used."""
        stamp = self._current_stamp()
        text = None if stamp == _NONE_KEPT else self.source.read(POLICY_KEY)
        if text is None:  # no file or row, no policy: no YAML parser loaded for it
            return _NONE_KEPT, EMPTY
        from vmware_pilot.policy.load import policy_from_text

        return stamp, policy_from_text(text)

    def check(self) -> Policy:
        """Read the policy now; PolicyInvalid (every problem by line) when it cannot be used."""
        with self._lock:
            self._stamp, self._policy = self._read()
            self._bad = None
            return self._policy

    def check_at_start(self) -> Policy:
        """``check``, refusing (``StartupRefused``, every problem by line) a policy that cannot be used."""
        try:
            return self.check()
        except PolicyInvalid as exc:
            raise startup_refusal(exc, self.where) from None

    def current(self) -> Policy:
        """The policy in force (re-read when it changed; the last usable one when it became unusable)."""
        stamp = self._current_stamp()
        with self._lock:
            if stamp in (self._stamp, self._bad):
                return self._policy
            try:
                self._stamp, self._policy = self._read()
                self._bad = None
            except PolicyInvalid as exc:
                self._bad = stamp
                _log.warning(
                    "the policy in %s cannot be used (%s); the policy read before (digest %s) stays in force",
                    self.where,
                    exc,
                    self._policy.digest[:12],
                )
            return self._policy

    def put(self, text: str, by: str) -> Policy:
        """Store ``text`` as the database's policy (checked first: PolicyInvalid, nothing stored)."""
        from vmware_pilot.policy.load import policy_from_text

        policy = policy_from_text(text)
        self.source.put(POLICY_KEY, text, None, by)
        return policy

    def text(self) -> str:
        """The stored policy text ('' when there is none)."""
        return self.source.read(POLICY_KEY) or ""
