"""Console sign-in sessions: a random cookie value stands for a signed-in person until it expires.

The person signs in with a Pilot token (a static token or, with OAuth on, an access token); the
token is verified once and then forgotten: the session keeps only the caller's identity and its
expiry. Sessions live in the database (``store.sessions``), keyed by the SHA-256 of the cookie
value, so every replica sharing it knows them, a restart signs nobody out, and signing out on
one replica signs out on all. The cookie value is 256-bit random; the session's CSRF token is
derived from it (HMAC), so it is never stored either. Secrets are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.store import SessionRows

__all__ = [
    "COOKIE",
    "LOGIN_COOKIE",
    "OIDC_COOKIE",
    "Session",
    "SessionBook",
    "same_secret",
    "token_fingerprint",
]

COOKIE: Final = "pilot_console"
# Double-submit CSRF cookie of the sign-in form (there is no session yet to hold the token).
LOGIN_COOKIE: Final = "pilot_console_login"
# The pre-login cookie of a sign-in at the identity provider: the key of its attempt (oidc.py).
OIDC_COOKIE: Final = "pilot_console_oidc"
# How long an expired session's row is kept, so a late request is told it expired.
KEEP_EXPIRED_SECONDS: Final = 3600.0
_COOKIE_MAX: Final = 200


def same_secret(a: str, b: str) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


def csrf_of(cookie: str) -> str:
    """The session's CSRF token: bound to its cookie value, unguessable without it."""
    return hmac.new(cookie.encode(), b"pilot-console-csrf", hashlib.sha256).hexdigest()


@dataclass
class Session:
    """A signed-in person: the identity at sign-in and, for a static token, ``token``: the
    fingerprint of the token signed in with (``token_fingerprint``), so the console can tell on
    every request whether that very token still exists (routes.py)."""

    actor: Actor
    csrf: str
    expires: datetime
    token: str = ""


def token_fingerprint(token_hash: str) -> str:
    """What a session keeps of its token: the SHA-256 of the token's stored hash (never the secret)."""
    return hashlib.sha256(token_hash.encode()).hexdigest()


def _actor_of(identity: dict[str, Any]) -> Actor | None:
    try:
        return Actor(
            name=str(identity["name"]),
            kind=identity.get("kind", "token"),
            role=str(identity.get("role", "")),
            display=str(identity.get("display", "")),
            groups=tuple(str(g) for g in identity.get("groups") or ()),
        )
    except (KeyError, TypeError):
        return None


class SessionBook:
    """The signed-in sessions of the console, kept as rows of the app's database."""

    def __init__(self, rows: SessionRows, minutes: float) -> None:
        self.rows = rows
        self.lifetime = timedelta(minutes=minutes)

    def open(self, actor: Actor, token: str = "") -> tuple[str, Session]:
        """A new session for ``actor`` (signed in with the token of fingerprint ``token``, if a
        static one): the cookie value and the session. Writes the database: call it in a worker
        thread from the event loop."""
        key = secrets.token_urlsafe(32)
        seconds = self.lifetime.total_seconds()
        identity = {**asdict(actor), "token": token}
        self.rows.open_session(key, identity, seconds, KEEP_EXPIRED_SECONDS)
        return key, Session(actor, csrf_of(key), utcnow() + self.lifetime, token)

    def get(self, key: str) -> tuple[Session | None, bool]:
        """(the live session for cookie value ``key``, whether it existed but has expired)."""
        if not key or len(key) > _COOKIE_MAX:
            return None, False
        row = self.rows.find_session(key)
        if row is None:
            return None, False
        actor = _actor_of(row.identity)
        if row.expired or actor is None:
            return None, row.expired
        token = str(row.identity.get("token") or "")
        return Session(actor, csrf_of(key), utcnow() + timedelta(seconds=row.remaining), token), False

    def close(self, key: str) -> None:
        """End the session (writes the database: a worker thread's job, as ``open``)."""
        if key and len(key) <= _COOKIE_MAX:
            self.rows.close_session(key)
