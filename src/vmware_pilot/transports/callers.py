"""Who is calling over HTTP: a static token from the token file, or an OAuth access token.

``CallerVerifier`` is the SDK's ``TokenVerifier``: a bearer that is a known static token is that
token's identity; otherwise, with OAuth on, it is validated as a JWT access token (oauth.py).
``current_caller`` turns the verified token of the request being handled into an ``Actor``.
``RoleGate`` answers 403 to an OAuth caller whose groups give no role, before the MCP layer.
While the token store (the database's token rows) cannot be read, a request that carries a bearer
is answered 503 with ``Retry-After`` (``answer_outages``), never 401: the token may well be valid.
``add_resource_metadata_root`` serves the protected resource metadata at the bare well-known
path too (the SDK serves it at ``/.well-known/oauth-protected-resource/mcp``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.authentication import AuthenticationError
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.duties import Role
from vmware_pilot.server.sdk import request_in_flight
from vmware_pilot.transports.oauth import JwtVerifier, OAuthConfig
from vmware_pilot.transports.tokens import TokenEntry, Tokens

__all__ = [
    "PRM_PATH",
    "RETRY_AFTER_SECONDS",
    "CallerVerifier",
    "RoleGate",
    "TokensUnreadable",
    "actor_of",
    "add_resource_metadata_root",
    "answer_outages",
    "current_caller",
    "gate_roles",
    "resource_metadata_url",
]

_log = logging.getLogger("vmware_pilot.http")

PRM_PATH = "/.well-known/oauth-protected-resource"
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
        try:
            entry = self._tokens.verify(token)
        except PilotError as exc:
            verified = await self._jwt.verify(token) if self._jwt is not None else None
            if verified is None:
                raise TokensUnreadable(exc) from exc
            return verified
        if entry is not None:
            # A static token holds every scope: the token file is the whole authorisation.
            scopes = list(self._jwt.config.scopes) if self._jwt is not None else []
            return AccessToken(
                token="", client_id=entry.name, scopes=scopes, subject=entry.name, claims={"role": entry.role}
            )
        return await self._jwt.verify(token) if self._jwt is not None else None

    def token_named(self, name: str) -> TokenEntry | None:
        """The static token called ``name`` as it stands now (None once revoked); raises
        ``TokensUnreadable`` while the token store cannot be read (nothing is assumed then)."""
        try:
            entries = self._tokens.entries()
        except PilotError as exc:
            raise TokensUnreadable(exc) from exc
        return next((e for e in entries if e.name == name), None)


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


class RoleGate:
    """403 ``insufficient_scope`` for an OAuth caller without a role; everyone else passes on."""

    def __init__(self, app: ASGIApp, role_of: Callable[[Actor], Role], metadata_url: str) -> None:
        self.app = app
        self._role_of = role_of
        self._metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if isinstance(user, AuthenticatedUser):
            actor = actor_of(user.access_token)
            if actor.kind == "oidc":
                try:
                    self._role_of(actor)
                except PilotError as exc:
                    _log.warning("refused OAuth caller %s: %s", actor.label, exc.message)
                    await _forbidden(send, exc.message, exc.hint, self._metadata_url)
                    return
        await self.app(scope, receive, send)


async def _forbidden(send: Send, message: str, hint: str, metadata_url: str) -> None:
    # Header values must be quoted-string safe: the description is ASCII without quotes.
    description = message.encode("ascii", "replace").decode().replace('"', "'").replace("\\", "/")
    challenge = (
        f'Bearer error="insufficient_scope", error_description="{description}", '
        f'resource_metadata="{metadata_url}"'
    )
    body = json.dumps({"error": "insufficient_scope", "error_description": message, "hint": hint}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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


def answer_outages(app: Starlette) -> None:
    """Make the SDK's authentication middleware of ``app`` answer ``TokensUnreadable`` with 503
    and ``Retry-After`` (before the first request: Starlette builds its stack then)."""
    for middleware in app.user_middleware:
        factory: object = middleware.cls
        if factory is AuthenticationMiddleware:
            middleware.kwargs["on_error"] = _unavailable
            return
    raise PilotError(
        "no authentication middleware to configure", hint="This is a bug in this build of vmware-pilot."
    )


def gate_roles(app: Starlette, path: str, role_of: Callable[[Actor], Role], metadata_url: str) -> None:
    """Put a ``RoleGate`` in front of the endpoint at ``path`` (after authentication has run)."""
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == path:
            route.app = RoleGate(route.app, role_of, metadata_url)
            return
    raise PilotError(f"no route {path} to guard", hint="This is a bug in this build of vmware-pilot.")


def resource_metadata_url(config: OAuthConfig) -> str:
    """Where the metadata for ``config.resource`` is (RFC 9728: the well-known path + ``/mcp``)."""
    return str(build_resource_metadata_url(AnyHttpUrl(config.resource)))


def add_resource_metadata_root(server: MCPServer[Any], config: OAuthConfig) -> None:
    """Serve RFC 9728 metadata at ``/.well-known/oauth-protected-resource`` as well."""
    metadata = ProtectedResourceMetadata(
        resource=AnyHttpUrl(config.resource),
        authorization_servers=[AnyHttpUrl(config.issuer)],
        scopes_supported=list(config.scopes) or None,
    )
    # The same document and handler as the SDK's route at the path-suffixed location.
    server.custom_route(PRM_PATH, methods=["GET"])(ProtectedResourceMetadataHandler(metadata).handle)
