"""``/livez`` and ``/readyz``: Kubernetes-style probes, answered to anyone and saying nothing secret.

``/livez`` answers while the process serves. ``/readyz`` runs the readiness checks: the database
(reachable, and migrated to the schema this build knows), the skills (with dispatch: every skill
named in VMWARE_PILOT_SKILL_COMMANDS and at least one skill of the catalog found), and OAuth (with
an issuer configured: its signing keys fetched). Each answers 200 ``ok`` or 503; ``?verbose``
lists each check by name (``[+]database ok``, ``[-]database failed: unreachable``). A check's detail
is fixed text chosen here, never an exception's message, which may carry a URL with a password.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.types import Scope, Send

from vmware_pilot.app import PilotApp
from vmware_pilot.dispatch.locate import locate
from vmware_pilot.errors import DispatchRefused, PilotError
from vmware_pilot.store.migrations import LATEST
from vmware_pilot.transports.jwks import IssuerKeys

__all__ = ["PROBE_PATHS", "Check", "Probes", "render"]

_log = logging.getLogger("vmware_pilot.health")

PROBE_PATHS = ("/livez", "/readyz")
# A probe never waits longer than this for the database (the pool's own timeouts may be longer).
_DATABASE_SECONDS = 5.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def render(kind: str, checks: list[Check], verbose: bool) -> tuple[int, bytes]:
    """Status and body of a probe (Kubernetes' text form)."""
    ok = all(c.ok for c in checks)
    if not verbose:
        return (200, b"ok\n") if ok else (503, f"{kind} check failed\n".encode())
    lines = [f"[+]{c.name} ok ({c.detail})" if c.ok else f"[-]{c.name} failed: {c.detail}" for c in checks]
    lines.append(f"{kind} check {'passed' if ok else 'failed'}")
    return (200 if ok else 503), ("\n".join(lines) + "\n").encode()


class Probes:
    """The probes of one server: ``app``'s store and dispatch, and ``keys`` when OAuth is on."""

    def __init__(self, app: PilotApp, keys: IssuerKeys | None = None) -> None:
        self.app = app
        self.keys = keys

    async def readiness(self) -> list[Check]:
        return [await self._database(), self._skills(), self._oauth()]

    async def _database(self) -> Check:
        try:
            version = await asyncio.wait_for(
                asyncio.to_thread(self.app.sql.database.schema_version), timeout=_DATABASE_SECONDS
            )
        except (PilotError, TimeoutError) as exc:
            _log.debug("readiness: database check failed: %s", getattr(exc, "message", type(exc).__name__))
            return Check("database", False, "unreachable")
        if version.applied < LATEST or not version.usable_by(LATEST):
            return Check("database", False, f"schema version {version.applied}, this build needs {LATEST}")
        return Check("database", True, f"schema version {version.applied}")

    def _skills(self) -> Check:
        if self.app.dispatcher is None:
            return Check("skills", True, "dispatch off: steps are handed back")
        settings = self.app.settings
        known = self.app.service.runner.catalog.skills()
        missing = []
        for skill in settings.skill_commands:
            try:
                locate(skill, settings.skill_commands, known_skills=known)
            except DispatchRefused:
                missing.append(skill)
        found = 0
        for skill in known:
            try:
                locate(skill, settings.skill_commands, known_skills=known)
            except DispatchRefused:
                continue
            found += 1
        if missing:
            return Check("skills", False, "not found: " + ", ".join(sorted(missing)))
        if not found:
            return Check("skills", False, "no skill server found")
        return Check("skills", True, f"{found} of {len(known)} found")

    def _oauth(self) -> Check:
        if self.keys is None:
            return Check("oauth", True, "off")
        if not self.keys.held:
            return Check("oauth", False, "the identity provider's signing keys are not fetched")
        return Check("oauth", True, "signing keys fetched")

    async def answer(self, scope: Scope, send: Send, respond: Callable[..., Awaitable[None]]) -> None:
        """Answer ``scope`` (a GET or HEAD of one of ``PROBE_PATHS``)."""
        path = scope["path"].rstrip("/")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        verbose = "verbose" in query
        if path == "/livez":
            status, body = render("livez", [Check("ping", True, "serving")], verbose)
        else:
            status, body = render("readyz", await self.readiness(), verbose)
        await respond(send, status, body, "text/plain; charset=utf-8", scope["method"] == "HEAD")
