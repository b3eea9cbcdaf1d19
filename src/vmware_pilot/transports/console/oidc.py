"""Console sign-in with OpenID Connect: the authorization code flow with PKCE, state and nonce.

``start`` makes one sign-in attempt: a random ``state``, ``nonce`` and PKCE verifier (S256), kept
here under a random key that the browser holds in the pre-login cookie, and the provider's
authorization URL. Attempts in progress are bounded per client address: a client's new attempt
past ``_PER_CLIENT`` replaces that client's own oldest one, never someone else's, and once
``_MAX_ATTEMPTS`` are in progress new ones are refused (``OidcBusy``) rather than evicting any. ``finish`` takes the callback's query and that key: the attempt is taken out
(so a callback replayed is refused), must not have expired, and its ``state`` must equal the
callback's; its ``iss`` (RFC 9207, as MCP 2026-07-28 asks of its clients against mix-up attacks)
must be the issuer exactly, and must be there when the provider's metadata says it sends it
(``authorization_response_iss_parameter_supported``), before anything in the answer, an error
included, is acted on; the discovery document must name the issuer exactly; the code is exchanged at the provider's token endpoint (with the verifier, and the
client secret for a confidential client); the ID token is validated with the issuer's published
keys (jwks.py): signature, ``iss``, ``aud`` = the client id, ``exp``/``iat``, and ``nonce`` equal
to the attempt's. The person is an ``oidc`` Actor: subject, display name and the groups of the
roles claim, read from the ID token or, when it lacks them, from the userinfo endpoint. Any
failure is an ``OidcRefused`` with a hint; the client secret and tokens are never logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import httpx
import jwt

from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.transports.jwks import IssuerKeys, _secure_enough, discovery_url
from vmware_pilot.transports.oauth import CLOCK_SKEW, claim_values, display_name

__all__ = ["ATTEMPT_SECONDS", "CALLBACK_PATH", "OidcBusy", "OidcLogin", "OidcRefused"]

CALLBACK_PATH: Final = "/console/oidc/callback"
ATTEMPT_SECONDS: Final = 600  # how long the person may take at the provider's login page
_MAX_ATTEMPTS: Final = 10_000
_PER_CLIENT: Final = 10
_MAX_BODY: Final = 1 << 20
_TIMEOUT: Final = 15.0
_AGAIN: Final = "Start again from the console's sign-in page."


class OidcRefused(PilotError):
    """A sign-in through the identity provider that cannot be completed (message and hint shown)."""


class OidcBusy(OidcRefused):
    """No new sign-in attempt is taken: too many are in progress from everywhere."""


@dataclass(frozen=True, slots=True)
class _Attempt:
    state: str
    nonce: str
    verifier: str
    next: str
    started: float
    client: str


@dataclass(frozen=True, slots=True)
class _Endpoints:
    authorize: str
    token: str
    userinfo: str
    iss_always: bool  # the provider says its every authorization response carries iss (RFC 9207)


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OidcLogin:
    """Sign-in attempts of one console at ``keys.issuer`` as client ``client_id``."""

    def __init__(
        self,
        keys: IssuerKeys,
        client_id: str,
        client_secret: str,
        scopes: str,
        roles_claim: str,
        redirect_uri: str,
    ) -> None:
        self.keys = keys
        self.issuer = keys.issuer
        self.client_id = client_id
        self._secret = client_secret
        self.scopes = " ".join(dict.fromkeys(["openid", *scopes.split()]))
        self.roles_claim = roles_claim
        self.redirect_uri = redirect_uri
        self._attempts: dict[str, _Attempt] = {}  # in the order they started
        self._of_client: dict[str, list[str]] = {}  # each client's attempt keys, oldest first
        self._lock = threading.Lock()
        self._endpoints: _Endpoints | None = None

    @classmethod
    def from_settings(cls, settings: Settings, keys: IssuerKeys, base: str) -> OidcLogin | None:
        """The console's OIDC sign-in, or None unless an issuer and a console client id are set."""
        if not settings.oauth_issuer or not settings.console_oidc_client_id.strip():
            return None
        return cls(
            keys,
            settings.console_oidc_client_id.strip(),
            settings.console_oidc_client_secret.get_secret_value(),
            settings.console_oidc_scopes,
            settings.oauth_roles_claim,
            base.rstrip("/") + CALLBACK_PATH,
        )

    # --- the attempt ------------------------------------------------------------------------
    async def start(self, next_path: str, client: str = "") -> tuple[str, str]:
        """A new attempt from ``client`` (its address): the pre-login cookie value and the URL to
        send the browser to; raises ``OidcBusy`` when too many attempts are in progress."""
        endpoints = await self._discover()
        attempt = _Attempt(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            verifier=secrets.token_urlsafe(64),  # 86 characters: within PKCE's 43-128
            next=next_path,
            started=time.monotonic(),
            client=client,
        )
        key = secrets.token_urlsafe(32)
        with self._lock:
            self._drop_old()
            mine = self._of_client.get(client, [])
            if len(mine) >= _PER_CLIENT:
                self._forget(mine[0])  # this client's own oldest
            elif len(self._attempts) >= _MAX_ATTEMPTS:
                raise OidcBusy(
                    "Too many sign-ins at the identity provider are in progress",
                    hint=f"Try again in a few minutes (an unfinished sign-in lapses after "
                    f"{ATTEMPT_SECONDS // 60} minutes), or sign in with a token.",
                )
            self._attempts[key] = attempt
            self._of_client.setdefault(client, []).append(key)
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": self.scopes,
            "state": attempt.state,
            "nonce": attempt.nonce,
            "code_challenge": _challenge(attempt.verifier),
            "code_challenge_method": "S256",
        }
        separator = "&" if "?" in endpoints.authorize else "?"
        return key, endpoints.authorize + separator + urlencode(query)

    def _drop_old(self) -> None:
        """Forget the attempts that expired (the oldest come first)."""
        now = time.monotonic()
        while self._attempts:
            key, attempt = next(iter(self._attempts.items()))
            if now - attempt.started <= ATTEMPT_SECONDS:
                return
            self._forget(key)

    def _forget(self, key: str) -> _Attempt | None:
        """Take attempt ``key`` out (None when there is none); the caller holds the lock."""
        attempt = self._attempts.pop(key, None)
        if attempt is not None:
            keys = self._of_client[attempt.client]
            keys.remove(key)
            if not keys:
                del self._of_client[attempt.client]
        return attempt

    async def finish(self, key: str, params: dict[str, str]) -> tuple[Actor, str]:
        """The person the callback ``params`` sign in, and the console path to go on to."""
        with self._lock:
            attempt = self._forget(key) if key else None
        if attempt is None:
            raise OidcRefused(
                "This sign-in attempt is unknown to the console: it was already used, or this browser "
                "did not start it",
                hint=_AGAIN + " The console's cookies must be allowed for this site.",
            )
        if time.monotonic() - attempt.started > ATTEMPT_SECONDS:
            raise OidcRefused(
                f"This sign-in attempt expired (after {ATTEMPT_SECONDS // 60} minutes)", hint=_AGAIN
            )
        if not hmac.compare_digest(params.get("state", "").encode(), attempt.state.encode()):
            raise OidcRefused(
                "The identity provider's answer does not belong to this sign-in (state)", hint=_AGAIN
            )
        issuer = params.get("iss")
        if issuer is not None and issuer != self.issuer:
            raise OidcRefused(
                f"The answer to this sign-in comes from another identity provider than {self.issuer} (iss)",
                hint=_AGAIN + " If it happens again, tell an administrator: an answer was sent from "
                "elsewhere.",
            )
        if issuer is None and (await self._discover()).iss_always:
            raise OidcRefused(
                f"The answer to this sign-in does not name its identity provider (iss), which "
                f"{self.issuer} says it always does",
                hint=_AGAIN,
            )
        if params.get("error"):
            described = params.get("error_description", "")[:300]
            raise OidcRefused(
                f"The identity provider refused the sign-in: {params['error'][:100]}"
                + (f" ({described})" if described else ""),
                hint="Check that your account may use this console's client at the identity provider.",
            )
        code = params.get("code", "")
        if not code:
            raise OidcRefused("The identity provider's answer holds no authorization code", hint=_AGAIN)
        answer = await self._exchange(code, attempt.verifier)
        claims = await self._id_claims(answer.get("id_token"), attempt.nonce)
        access = answer.get("access_token")
        if ("name" not in claims or self.roles_claim not in claims) and isinstance(access, str):
            claims = {**await self._userinfo(access, str(claims["sub"])), **claims}
        actor = Actor(
            name=str(claims["sub"]),
            kind="oidc",
            role="",
            display=display_name(claims),
            groups=tuple(claim_values(claims, self.roles_claim)),
        )
        return actor, attempt.next

    # --- the provider -----------------------------------------------------------------------
    async def _discover(self) -> _Endpoints:
        if self._endpoints is None:
            document = await self._call("GET", discovery_url(self.issuer))
            if document.get("issuer") != self.issuer:
                raise OidcRefused(
                    f"The discovery document of {self.issuer} names another issuer",
                    hint="Set VMWARE_PILOT_OAUTH_ISSUER to exactly the issuer the document names "
                    "(a trailing slash counts).",
                )
            urls = {
                k: document.get(k)
                for k in (
                    "authorization_endpoint",
                    "token_endpoint",
                    "userinfo_endpoint",
                )
            }
            # The code, the client secret and the tokens travel there: https (plain http on loopback).
            if not all(
                isinstance(u, str) and _secure_enough(u) for u in urls.values() if u is not None
            ) or not (urls["authorization_endpoint"] and urls["token_endpoint"]):
                raise OidcRefused(
                    f"The discovery document of {self.issuer} names no https authorization or token endpoint",
                    hint="Check VMWARE_PILOT_OAUTH_ISSUER and the identity provider's configuration.",
                )
            authorize, token, userinfo = (u if isinstance(u, str) else "" for u in urls.values())
            self._endpoints = _Endpoints(
                authorize,
                token,
                userinfo,
                iss_always=document.get("authorization_response_iss_parameter_supported") is True,
            )
        return self._endpoints

    async def _exchange(self, code: str, verifier: str) -> dict[str, Any]:
        endpoints = await self._discover()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }
        auth: tuple[str, str] | None = None
        if self._secret:
            auth = (self.client_id, self._secret)  # client_secret_basic
        else:
            form["client_id"] = self.client_id
        return await self._call("POST", endpoints.token, data=form, auth=auth, what="the token endpoint")

    async def _id_claims(self, token: Any, nonce: str) -> dict[str, Any]:
        if not isinstance(token, str) or token.count(".") != 2:
            raise OidcRefused("The identity provider sent no ID token", hint="Ask for the scope openid.")
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            raise OidcRefused("The ID token is not a JWT", hint=_AGAIN) from None
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key is None or key.algorithm_name.startswith("HS"):
            raise OidcRefused(f"The ID token is signed with an unknown key {kid!r}", hint=_AGAIN)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[key.algorithm_name],
                audience=self.client_id,
                issuer=self.issuer,
                leeway=CLOCK_SKEW,
                options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]},
            )
        except jwt.PyJWTError as exc:
            raise OidcRefused(
                f"The ID token is not valid ({type(exc).__name__}: {exc})", hint=_AGAIN
            ) from None
        if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), nonce.encode()):
            raise OidcRefused("The ID token belongs to another sign-in (nonce)", hint=_AGAIN)
        subject = claims.get("sub")
        if (
            not isinstance(subject, str)
            or not subject
            or len(subject) > 255
            or any(c in "() " for c in subject)
        ):
            raise OidcRefused("The ID token's subject is not usable", hint="Check the identity provider.")
        return claims

    async def _userinfo(self, access_token: str, subject: str) -> dict[str, Any]:
        endpoint = (await self._discover()).userinfo
        if not endpoint:
            return {}
        info = await self._call(
            "GET", endpoint, headers={"authorization": f"Bearer {access_token}"}, what="the userinfo endpoint"
        )
        # OpenID Connect Core 5.3.2: a userinfo answer for another subject must not be used.
        return info if info.get("sub") == subject else {}

    async def _call(self, method: str, url: str, *, what: str = "", **kwargs: Any) -> dict[str, Any]:
        what = what or url
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT, follow_redirects=False) as client:
                response = await client.request(method, url, headers=kwargs.pop("headers", None), **kwargs)
        except httpx.HTTPError as exc:
            raise OidcRefused(
                f"The console cannot reach {what} ({type(exc).__name__})",
                hint="Check that this host reaches the identity provider.",
            ) from None
        try:
            document = json.loads(response.content[:_MAX_BODY])
        except ValueError:
            document = None
        if response.status_code != 200 or not isinstance(document, dict):
            error = document.get("error", "") if isinstance(document, dict) else ""
            raise OidcRefused(
                f"{what} answered HTTP {response.status_code}" + (f" ({str(error)[:100]})" if error else ""),
                hint=_AGAIN + " If it happens again, check the console's client id and secret.",
            )
        return document
