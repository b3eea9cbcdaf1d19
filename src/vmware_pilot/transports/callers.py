"""Who is calling over HTTP: a static token from the token file, or an OAuth access token.

``CallerVerifier`` is the SDK's ``TokenVerifier``: a bearer that is a known static token is that
token's identity; otherwise, with OAuth on, it is validated as a JWT access token (oauth.py).
``current_caller`` turns the verified token of the request being handled into an ``Actor``.
``CallerBackend`` authenticates every request (``install_authentication`` puts it in place of the
SDK's backend): a refused bearer leaves the request anonymous, the refusal's description noted.
With OAuth on, ``ResourceGate`` answers for ``/mcp`` before the MCP layer, as an OAuth 2.1
resource server of the MCP 2026-07-28 revision: 401 without a valid token (RFC 6750: ``error=
"invalid_token"`` with why, only when a token was sent), 403 ``insufficient_scope`` naming every
scope required when the token lacks one, 403 to an OAuth caller whose groups give no role; each
challenge names the protected resource metadata and the required scopes. While the token store
(the database's token rows) cannot be read, a request that carries a bearer is answered 503 with
``Retry-After``, never 401: the token may well be valid. ``serve_resource_metadata`` serves the
protected resource metadata (RFC 9728) at the path-suffixed well-known path and the bare one, the
issuer written exactly as configured (a client compares it with the authorization server's
``issuer`` as a simple string).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, AuthenticationError
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.duties import Role
from vmware_pilot.server.sdk import request_in_flight
from vmware_pilot.transports.oauth import JwtVerifier, OAuthConfig, Refusal
from vmware_pilot.transports.tokens import TokenEntry, Tokens

__all__ = [
    "PRM_PATH",
    "RESOURCE_NAME",
    "RETRY_AFTER_SECONDS",
    "CallerBackend",
    "CallerVerifier",
    "ResourceGate",
    "TokensUnreadable",
    "actor_of",
    "current_caller",
    "gate_resource",
    "install_authentication",
    "resource_metadata",
    "resource_metadata_url",
    "serve_resource_metadata",
]

_log = logging.getLogger("vmware_pilot.http")

PRM_PATH = "/.well-known/oauth-protected-resource"
RESOURCE_NAME = "vmware-pilot"  # the protected resource metadata's resource_name
_REFUSAL = "vmware_pilot.token_refusal"  # where CallerBackend notes why a bearer was refused
# What a caller refused while the token store cannot be read is told to wait before retrying.
RETRY_AFTER_SECONDS = 5


class TokensUnreadable(AuthenticationError):
    """The token store cannot be read (the database is away): the bearer can be neither
    accepted nor refused. Answered 503 with ``Retry-After`` (``answer_outages``)."""

    def __init__(self, problem: PilotError) -> None:
        super().__init__(problem.message)
        self.problem = problem


class CallerVerifier:
    """Static tokens first, then (with ``jwt``) OAuth access tokens."""

    def __init__(self, tokens: Tokens, jwt: JwtVerifier | None = None) -> None:
        self._tokens = tokens
        self._jwt = jwt

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's identity; None when it is none; ``TokensUnreadable`` when the token store
        cannot be read and the bearer is not a valid OAuth access token either."""
        checked = await self.check(token)
        return checked if isinstance(checked, AccessToken) else None

    async def check(self, token: str) -> AccessToken | Refusal:
        """The token's identity, or why it is none; raises ``TokensUnreadable`` as ``verify_token``."""
        try:
            entry = self._tokens.verify(token)
        except PilotError as exc:
            checked = await self._jwt.check(token) if self._jwt is not None else None
            if not isinstance(checked, AccessToken):
                raise TokensUnreadable(exc) from exc
            return checked
        if entry is not None:
            # A static token holds every scope: the token file is the whole authorisation.
            scopes = list(self._jwt.config.scopes) if self._jwt is not None else []
            return AccessToken(
                token="", client_id=entry.name, scopes=scopes, subject=entry.name, claims={"role": entry.role}
            )
        if self._jwt is None:
            return Refusal("The bearer token is not a token of this server", "unknown static token")
        return await self._jwt.check(token)

    def token_named(self, name: str) -> TokenEntry | None:
        """The static token called ``name`` as it stands now (None once revoked); raises
        ``TokensUnreadable`` while the token store cannot be read (nothing is assumed then)."""
        try:
            entries = self._tokens.entries()
        except PilotError as exc:
            raise TokensUnreadable(exc) from exc
        return next((e for e in entries if e.name == name), None)


class CallerBackend(AuthenticationBackend):
    """Starlette authentication by ``CallerVerifier``: a valid bearer makes the request's user;
    a refused one leaves it anonymous with the refusal noted for ``ResourceGate``'s 401."""

    def __init__(self, verifier: CallerVerifier) -> None:
        self._verifier = verifier

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        header = conn.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            return None
        checked = await self._verifier.check(header[7:].strip())
        if isinstance(checked, AccessToken) and checked.expires_at and checked.expires_at < int(time.time()):
            checked = Refusal("The access token has expired", "expired")
        if isinstance(checked, Refusal):
            conn.scope[_REFUSAL] = checked
            return None
        return AuthCredentials(checked.scopes), AuthenticatedUser(checked)


def actor_of(token: AccessToken) -> Actor:
    """The caller a verified token stands for."""
    claims = token.claims or {}
    if claims.get("kind") == "oidc":
        groups = claims.get("groups")
        return Actor(
            name=token.subject or "",
            kind="oidc",
            role="",
            display=str(claims.get("display", "")),
            groups=tuple(groups) if isinstance(groups, list) else (),
        )
    return Actor(name=token.client_id, kind="token", role=str(claims.get("role", "")))


def current_caller() -> Actor:
    """The caller of the MCP request being handled (read from that HTTP request)."""
    ctx = request_in_flight()
    request = ctx.request if ctx is not None else None
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    if not isinstance(user, AuthenticatedUser):
        raise PilotError(
            "No authenticated caller for this request",
            hint="Send the token in the Authorization header: `Authorization: Bearer <token>`.",
        )
    return actor_of(user.access_token)


class ResourceGate:
    """The OAuth resource server's answers for one endpoint, before the MCP layer: 401 without a
    valid token, 403 when an OAuth token lacks a required scope or its groups give no role."""

    def __init__(
        self,
        app: ASGIApp,
        role_of: Callable[[Actor], Role],
        metadata_url: str,
        scopes: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self._role_of = role_of
        self._metadata_url = metadata_url
        self._scopes = scopes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            refusal = scope.get(_REFUSAL)
            if isinstance(refusal, Refusal):
                await self._challenge(send, 401, "invalid_token", refusal.description)
            else:  # RFC 6750 section 3: no error code when the request carried no token
                await self._challenge(send, 401, "", "An access token is required")
            return
        actor = actor_of(user.access_token)
        if actor.kind == "oidc":
            missing = [s for s in self._scopes if s not in user.access_token.scopes]
            if missing:
                await self._challenge(
                    send,
                    403,
                    "insufficient_scope",
                    f"The access token lacks the scope {' '.join(missing)}",
                    "Ask the authorization server for a token with the scopes of this challenge.",
                )
                return
            try:
                self._role_of(actor)
            except PilotError as exc:
                _log.warning("refused OAuth caller %s: %s", actor.label, exc.message)
                await self._challenge(send, 403, "insufficient_scope", exc.message, exc.hint)
                return
        await self.app(scope, receive, send)

    async def _challenge(self, send: Send, status: int, error: str, description: str, hint: str = "") -> None:
        params = [f'error="{error}"', f'error_description="{_quotable(description)}"'] if error else []
        params.append(f'resource_metadata="{self._metadata_url}"')
        if self._scopes:
            params.append(f'scope="{" ".join(self._scopes)}"')
        body: dict[str, str] = {"error": error or "invalid_token", "error_description": description}
        if hint:
            body["hint"] = hint
        await _send_json(send, status, body, [(b"www-authenticate", f"Bearer {', '.join(params)}".encode())])


def _quotable(text: str) -> str:
    """``text`` as the inside of a quoted-string: ASCII, no quotes or backslashes."""
    return text.encode("ascii", "replace").decode().replace('"', "'").replace("\\", "/")


async def _send_json(
    send: Send, status: int, body: dict[str, str], headers: list[tuple[bytes, bytes]]
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _unavailable(_conn: HTTPConnection, exc: AuthenticationError) -> Response:
    """503 + Retry-After for ``TokensUnreadable``; the SDK's own errors keep their 400."""
    if not isinstance(exc, TokensUnreadable):
        return AuthenticationMiddleware.default_on_error(_conn, exc)
    body = {
        "error": "temporarily_unavailable",
        # Which database and why are in the server's log, not for a caller not yet identified.
        "error_description": "Pilot's database is unavailable, so the token cannot be checked",
        "hint": f"Retry in {RETRY_AFTER_SECONDS} s; nothing was done.",
        "retryable": True,
    }
    return JSONResponse(body, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def install_authentication(app: Starlette, verifier: CallerVerifier) -> None:
    """Make the SDK's authentication middleware of ``app`` authenticate with ``CallerBackend``
    and answer ``TokensUnreadable`` with 503 and ``Retry-After`` (before the first request:
    Starlette builds its stack then)."""
    for middleware in app.user_middleware:
        factory: object = middleware.cls
        if factory is AuthenticationMiddleware:
            middleware.kwargs["backend"] = CallerBackend(verifier)
            middleware.kwargs["on_error"] = _unavailable
            return
    raise PilotError(
        "no authentication middleware to configure", hint="This is a bug in this build of vmware-pilot."
    )


def gate_resource(app: Starlette, path: str, role_of: Callable[[Actor], Role], config: OAuthConfig) -> None:
    """Put a ``ResourceGate`` in front of the endpoint at ``path`` (after authentication has run)."""
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == path:
            route.app = ResourceGate(route.app, role_of, resource_metadata_url(config), config.scopes)
            return
    raise PilotError(f"no route {path} to guard", hint="This is a bug in this build of vmware-pilot.")


def resource_metadata_url(config: OAuthConfig) -> str:
    """Where the metadata for ``config.resource`` is (RFC 9728: the well-known path + ``/mcp``)."""
    return str(build_resource_metadata_url(AnyHttpUrl(config.resource)))


def resource_metadata(config: OAuthConfig) -> dict[str, Any]:
    """The RFC 9728 document: this resource, its one authorization server (the issuer exactly as
    configured, which is what the tokens' ``iss`` must be), the scopes to ask for, bearer tokens
    in the Authorization header only. Written here rather than by the SDK's model, which would
    normalise the issuer (``https://idp`` → ``https://idp/``) so that it no longer compares equal
    to the issuer of the authorization server's own metadata."""
    document: dict[str, Any] = {
        "resource": config.resource,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": RESOURCE_NAME,
    }
    if config.scopes:
        document["scopes_supported"] = list(config.scopes)
    return document


def serve_resource_metadata(server: MCPServer[Any], config: OAuthConfig) -> None:
    """Serve the protected resource metadata at ``/.well-known/oauth-protected-resource/mcp``
    (RFC 9728 section 3.1) and at the bare well-known path, readable cross-origin (browser clients)."""
    document = resource_metadata(config)

    async def handle(_request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    endpoint = cors_middleware(handle, ["GET", "OPTIONS"])
    suffixed = AnyHttpUrl(resource_metadata_url(config)).path or PRM_PATH
    for path in dict.fromkeys((suffixed, PRM_PATH)):
        server.custom_route(path, methods=["GET", "OPTIONS"])(endpoint)
