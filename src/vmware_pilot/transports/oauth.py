"""OAuth 2.1 resource server: JWT access tokens from the configured issuer, validated in full.

A token is accepted only when its signature verifies against the issuer's published key (jwks.py;
asymmetric algorithms only, the algorithm being the key's), ``iss`` is the configured issuer
exactly, ``aud`` names this server's audience (by default its resource URL, ``…/mcp``), ``exp``
has not passed and ``nbf``/``iat`` are not in the future (a minute of clock skew either way), and
``sub`` is present. The caller is the subject; its display name comes from ``name`` or
``preferred_username``; its groups from the roles claim. Anything else gets None (a 401), with
the reason logged and never the token.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from mcp.server.auth.provider import AccessToken

from vmware_pilot.config import Settings
from vmware_pilot.transports.jwks import IssuerKeys

__all__ = ["CLOCK_SKEW", "JwtVerifier", "OAuthConfig", "claim_values", "display_name"]

_log = logging.getLogger("vmware_pilot.oauth")

CLOCK_SKEW = 60  # seconds of leeway on exp, nbf and iat
_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"}
)
_MAX_TOKEN = 16 * 1024
_NOT_A_JWT = "not a JWT"
# OpenID Connect: sub is at most 255 ASCII characters. No spaces or parentheses either, so the
# caller's label `Name (oidc:<sub>)` can be read back unambiguously (domain/actor.py).
_SUBJECT = re.compile(r"^[\x21-\x7e]{1,255}$")
_MAX_GROUPS = 256
_MAX_GROUP = 256
_MAX_DISPLAY = 80


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """What a token must say: ``issuer``, ``audience``; where the groups are; required scopes.
    ``resource`` is this server's MCP URL, announced in the protected resource metadata."""

    issuer: str
    resource: str
    audience: str
    roles_claim: str = "groups"
    scopes: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings, resource: str) -> OAuthConfig | None:
        """The OAuth configuration, or None when no issuer is set (static tokens only)."""
        if not settings.oauth_issuer:
            return None
        return cls(
            issuer=settings.oauth_issuer,
            resource=resource,
            audience=settings.oauth_audience.strip() or resource,
            roles_claim=settings.oauth_roles_claim,
            scopes=tuple(settings.oauth_scope_list),
        )


def claim_values(claims: Mapping[str, Any], name: str) -> list[str]:
    """The strings of claim ``name``: a top-level claim of that exact name (claim names may hold
    dots, e.g. URLs), else a dotted path into objects (``realm_access.roles``). A single string
    counts as one value; anything that is not a string is ignored."""
    value: Any = claims.get(name)
    if value is None and "." in name:
        value = claims
        for part in name.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [v for v in value[:_MAX_GROUPS] if isinstance(v, str) and 0 < len(v) <= _MAX_GROUP]


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """``scope`` (RFC 9068: space-separated) or ``scp`` (Entra ID: a string; Okta: a list)."""
    scopes: list[str] = []
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            scopes += value.split()
        elif isinstance(value, list):
            scopes += [v for v in value if isinstance(v, str)]
    return list(dict.fromkeys(scopes))


def display_name(claims: Mapping[str, Any]) -> str:
    """The person's name for the audit trail: printable, one line, bounded, no parentheses."""
    for name in ("name", "preferred_username"):
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            kept = "".join(
                " " if c.isspace() else c
                for c in value
                if c not in "()" and (c.isspace() or unicodedata.category(c)[0] != "C")
            )
            text = " ".join(kept.split())[:_MAX_DISPLAY].strip()
            if text:
                return text
    return ""


class JwtVerifier:
    """Validates JWT access tokens of ``config.issuer`` with the keys of ``keys``."""

    def __init__(self, config: OAuthConfig, keys: IssuerKeys) -> None:
        self.config = config
        self.keys = keys

    async def verify(self, token: str) -> AccessToken | None:
        """The validated token as the SDK's ``AccessToken``, or None with the reason logged."""
        try:
            return await self._verify(token)
        except _Refused as exc:
            # A bearer that is no JWT at all is most likely a mistyped static token: less alarming.
            level = logging.INFO if str(exc) == _NOT_A_JWT else logging.WARNING
            _log.log(level, "OAuth access token refused: %s", exc)
            return None

    async def _verify(self, token: str) -> AccessToken:
        if not token or len(token) > _MAX_TOKEN or token.count(".") != 2:
            raise _Refused(_NOT_A_JWT)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _Refused(_NOT_A_JWT) from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in _ALGORITHMS:
            raise _Refused(f"algorithm {alg!r} is not accepted (asymmetric signatures only)")
        if kid is not None and not isinstance(kid, str):
            raise _Refused("the key id is not a string")
        key = await self.keys.key(kid)
        if key is None:
            raise _Refused(f"no signing key {kid!r} among the issuer's published keys")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[key.algorithm_name],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=CLOCK_SKEW,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise _Refused(f"{type(exc).__name__}: {exc}") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not _SUBJECT.match(subject) or any(c in "()" for c in subject):
            raise _Refused(
                "the subject is not 1-255 printable ASCII characters without spaces or parentheses"
            )
        scopes = _scopes(claims)
        missing = [s for s in self.config.scopes if s not in scopes]
        if missing:
            # Not refused here: the SDK answers 403 insufficient_scope, which tells the client why.
            _log.warning("OAuth access token of %s lacks the scope(s) %s", subject, " ".join(missing))
        client = claims.get("client_id") or claims.get("azp") or subject
        return AccessToken(
            token="",  # nothing downstream needs the token itself
            client_id=str(client),
            scopes=scopes,
            # The SDK refuses a token past expires_at with no leeway: give it the same skew.
            expires_at=int(claims["exp"]) + CLOCK_SKEW,
            resource=self.config.resource,
            subject=subject,
            claims={
                "kind": "oidc",
                "iss": claims["iss"],
                "display": display_name(claims),
                "groups": claim_values(claims, self.config.roles_claim),
            },
        )


class _Refused(Exception):
    """Why a token is refused (logged; the client only sees 401)."""
