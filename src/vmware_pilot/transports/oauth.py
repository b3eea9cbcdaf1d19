"""OAuth 2.1 resource server: JWT access tokens from the configured issuer, validated in full.

A token is accepted only when its signature verifies against the issuer's published key (jwks.py;
asymmetric algorithms only, the algorithm being the key's), ``iss`` is the configured issuer
exactly, ``aud`` names this server's audience (by default its resource URL, ``…/mcp``), ``exp``
has not passed and ``nbf``/``iat`` are not in the future (a minute of clock skew either way), and
``sub`` is present. The caller is the subject; its display name comes from ``name`` or
``preferred_username``; its groups from the roles claim. Anything else is a ``Refusal``: the
reason in the log (never the token), a description for the client's 401 (callers.py puts it in
``WWW-Authenticate``). The issuer is compared first, as a simple string (MCP 2026-07-28, RFC 8414
section 3.3: no case folding, no trailing-slash or default-port leniency): a token of another issuer is
refused before any key is looked up, so it never makes Pilot fetch the issuer's keys again.
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

__all__ = [
    "CLOCK_SKEW",
    "JwtVerifier",
    "OAuthConfig",
    "Refusal",
    "claim_values",
    "client_support",
    "display_name",
]

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
_MAX_SHOWN = 120  # characters of a token's own claim (e.g. its iss) repeated in a refusal
_INVALID = "The access token is not valid"
# What the client is told for each of PyJWT's refusals (the log keeps PyJWT's own words).
_DESCRIBED: dict[type[jwt.PyJWTError], str] = {
    jwt.ExpiredSignatureError: "The access token has expired",
    jwt.ImmatureSignatureError: "The access token is not valid yet (nbf or iat lies in the future)",
    jwt.InvalidSignatureError: "The access token's signature does not verify with the authorization "
    "server's published keys",
}


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


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a bearer token is refused: ``description`` is for the client (the 401's
    ``error_description``: printable, bounded, naming nothing the client does not know or the
    protected resource metadata does not say), ``reason`` for the server's log."""

    description: str
    reason: str


def _shown(value: object) -> str:
    """A claim of the token as a refusal may repeat it: printable ASCII, bounded."""
    text = "".join(c if 0x20 < ord(c) < 0x7F else "?" for c in str(value))
    return text[:_MAX_SHOWN] + ("..." if len(text) > _MAX_SHOWN else "")


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


def client_support(metadata: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    """What MCP clients of the 2026-07-28 revision need of the issuer, read from its discovery
    document: (what, whether it is there, what it means). Pilot only points clients to the issuer
    (its protected resource metadata); the registration and PKCE are between them and the issuer.
    """
    methods = metadata.get("code_challenge_methods_supported")
    pkce = isinstance(methods, list) and "S256" in methods
    cimd = metadata.get("client_id_metadata_document_supported") is True
    dcr = isinstance(metadata.get("registration_endpoint"), str)
    if cimd:
        registration = (
            "clients register by client ID metadata documents (their client_id is the URL of their metadata)"
        )
    elif dcr:
        registration = (
            "clients register by dynamic client registration only (deprecated by MCP 2026-07-28 "
            "in favour of client ID metadata documents)"
        )
    else:
        registration = "neither client ID metadata documents nor dynamic registration: register each MCP client at the issuer in advance"
    return [
        (
            "PKCE",
            pkce,
            "S256 advertised"
            if pkce
            else "code_challenge_methods_supported lacks S256: MCP clients refuse to sign in there",
        ),
        ("registration", cimd or dcr, registration),
    ]


class JwtVerifier:
    """Validates JWT access tokens of ``config.issuer`` with the keys of ``keys``."""

    def __init__(self, config: OAuthConfig, keys: IssuerKeys) -> None:
        self.config = config
        self.keys = keys

    async def verify(self, token: str) -> AccessToken | None:
        """The validated token as the SDK's ``AccessToken``, or None with the reason logged."""
        checked = await self.check(token)
        return checked if isinstance(checked, AccessToken) else None

    async def check(self, token: str) -> AccessToken | Refusal:
        """The validated token, or why it is refused (the reason logged, never the token)."""
        try:
            return await self._verify(token)
        except _Refused as exc:
            # A bearer that is no JWT at all is most likely a mistyped static token: less alarming.
            level = logging.INFO if exc.reason == _NOT_A_JWT else logging.WARNING
            _log.log(level, "OAuth access token refused: %s", exc.reason)
            return Refusal(exc.description, exc.reason)

    async def _verify(self, token: str) -> AccessToken:
        not_ours = "The bearer token is neither a token of this server nor a JWT access token"
        if not token or len(token) > _MAX_TOKEN or token.count(".") != 2:
            raise _Refused(_NOT_A_JWT, not_ours)
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise _Refused(_NOT_A_JWT, not_ours) from None
        issuer = unverified.get("iss")
        if issuer != self.config.issuer:
            # Read before the signature is checked, so only ever used to refuse.
            if issuer is None:
                raise _Refused("no iss claim", "The access token names no issuer (iss)")
            raise _Refused(
                f"issuer {_shown(issuer)!r} is not {self.config.issuer!r}",
                f"The access token was issued by {_shown(issuer)}, not by {self.config.issuer}, the "
                "authorization server of this resource (see its protected resource metadata)",
            )
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in _ALGORITHMS:
            raise _Refused(
                f"algorithm {alg!r} is not accepted (asymmetric signatures only)",
                "The access token is not signed with an asymmetric algorithm",
            )
        if kid is not None and not isinstance(kid, str):
            raise _Refused("the key id is not a string", _INVALID)
        key = await self.keys.key(kid)
        if key is None:
            raise _Refused(
                f"no signing key {kid!r} among the issuer's published keys",
                f"The access token is signed with a key ({_shown(kid)}) that {self.config.issuer} "
                "does not publish",
            )
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
            raise _Refused(f"{type(exc).__name__}: {exc}", self._described(exc)) from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not _SUBJECT.match(subject) or any(c in "()" for c in subject):
            raise _Refused(
                "the subject is not 1-255 printable ASCII characters without spaces or parentheses",
                "The access token's subject (sub) is not 1-255 printable characters without spaces "
                "or parentheses",
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

    def _described(self, exc: jwt.PyJWTError) -> str:
        if isinstance(exc, jwt.InvalidAudienceError):
            return f"The access token is not for this resource: its audience (aud) must name {self.config.audience}"
        if isinstance(exc, jwt.MissingRequiredClaimError):
            return f"The access token lacks the {exc.claim} claim"
        return next((text for kind, text in _DESCRIBED.items() if isinstance(exc, kind)), _INVALID)


class _Refused(Exception):
    """Why a token is refused: ``reason`` for the log, ``description`` for the client's 401."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.description = description
