"""Where the policy in force comes from: the policy file, or (a database URL is set) the
database's policy row, shared by every replica.

``PolicySource.current()`` is asked at every door; it re-reads the file when its size or time
changed (the row when its digest changed) and parses a text once per change. A text that
cannot be used after start-up is logged once and the last usable policy stays in force, so an
edit half-way through never lifts a rule; ``check()`` raises at start-up instead.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol

from vmware_pilot.errors import StartupRefused
from vmware_pilot.policy.model import EMPTY, Policy, PolicyInvalid

__all__ = ["PolicyRows", "PolicySource", "startup_refusal"]

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


class PolicySource:
    """The policy in force: ``path``'s, or ``rows``' when given."""

    def __init__(self, path: Path, rows: PolicyRows | None = None) -> None:
        self.path = path
        self.rows = rows
        self._lock = threading.Lock()
        self._stamp: object = None
        self._policy: Policy = EMPTY
        self._bad: object = None

    @property
    def where(self) -> str:
        return "the database" if self.rows is not None else str(self.path)

    def _file_stamp(self) -> object:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return "absent"
        except OSError as exc:
            return f"unreadable:{exc.errno}"
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def _read(self) -> tuple[object, Policy]:
        """(stamp, policy) as stored now; PolicyInvalid when it cannot be used."""
        if self.rows is None:
            stamp = self._file_stamp()
            if stamp == "absent":  # no file, no policy: no YAML parser loaded for it
                return stamp, EMPTY
            from vmware_pilot.policy.load import read_policy_file

            return stamp, read_policy_file(self.path)
        row = self.rows.policy_row()
        if row is None:
            return None, EMPTY
        from vmware_pilot.policy.load import policy_from_text

        return row[1], policy_from_text(row[0])

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
        stamp = self._file_stamp() if self.rows is None else self.rows.policy_stamp()
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
        if self.rows is None:
            raise ValueError("the policy is a file here; edit it")
        from vmware_pilot.policy.load import policy_from_text

        policy = policy_from_text(text)
        self.rows.put_policy(text, policy.digest, by)
        return policy

    def text(self) -> str:
        """The stored policy text ('' when there is none)."""
        if self.rows is not None:
            row = self.rows.policy_row()
            return row[0] if row else ""
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
