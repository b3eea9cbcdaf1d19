"""Console sign-in sessions: a random cookie value stands for a signed-in person until it expires.

The person signs in with a Pilot token (a static token or, with OAuth on, an access token); the
token is verified once and then forgotten: the session keeps only the caller's identity, its
CSRF token and its expiry. Sessions live in this process's memory, so a restart signs everyone
out. Cookie values and CSRF tokens are 256-bit random and compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import utcnow

__all__ = ["COOKIE", "LOGIN_COOKIE", "OIDC_COOKIE", "Session", "SessionBook", "same_secret"]

COOKIE: Final = "pilot_console"
# Double-submit CSRF cookie of the sign-in form (there is no session yet to hold the token).
LOGIN_COOKIE: Final = "pilot_console_login"
# The pre-login cookie of a sign-in at the identity provider: the key of its attempt (oidc.py).
OIDC_COOKIE: Final = "pilot_console_oidc"
_MAX_SESSIONS: Final = 10_000


def same_secret(a: str, b: str) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


@dataclass
class Session:
    actor: Actor
    csrf: str
    expires: datetime


class SessionBook:
    """The signed-in sessions of one console (thread-safe; expired ones are dropped when seen)."""

    def __init__(self, minutes: float) -> None:
        self.lifetime = timedelta(minutes=minutes)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, actor: Actor) -> tuple[str, Session]:
        """A new session for ``actor``: the cookie value and the session."""
        key = secrets.token_urlsafe(32)
        session = Session(actor, secrets.token_urlsafe(32), utcnow() + self.lifetime)
        with self._lock:
            now = utcnow()
            for old in [k for k, s in self._sessions.items() if s.expires <= now]:
                del self._sessions[old]
            if len(self._sessions) >= _MAX_SESSIONS:
                del self._sessions[min(self._sessions, key=lambda k: self._sessions[k].expires)]
            self._sessions[key] = session
        return key, session

    def get(self, key: str) -> tuple[Session | None, bool]:
        """(the live session for cookie value ``key``, whether it existed but has expired)."""
        if not key:
            return None, False
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None, False
            if session.expires <= utcnow():
                del self._sessions[key]
                return None, True
            return session, False

    def close(self, key: str) -> None:
        with self._lock:
            self._sessions.pop(key, None)
