"""The console's sign-in: with a token (the form), or at the identity provider (``oidc.py``), both
ending in the same session (``sessions``); and signing out."""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Final

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import DatabaseUnavailable, PilotError
from vmware_pilot.transports.callers import TokensUnreadable, actor_of
from vmware_pilot.transports.console.oidc import ATTEMPT_SECONDS, OidcBusy, OidcRefused
from vmware_pilot.transports.console.plumbing import safe_next
from vmware_pilot.transports.console.sessions import (
    COOKIE,
    LOGIN_COOKIE,
    OIDC_COOKIE,
    same_secret,
    token_fingerprint,
)
from vmware_pilot.transports.tokens import hash_secret

if TYPE_CHECKING:
    from vmware_pilot.transports.console.routes import Console

__all__ = ["SignIn"]

_log = logging.getLogger("vmware_pilot.console")
_TOKEN_MAX: Final = 8192
_EXPIRY_NOTICE_SECONDS: Final = 600


class SignIn:
    """The sign-in and sign-out routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console

    async def login_form(self, request: Request) -> Response:
        nonce = secrets.token_urlsafe(32)
        expired = request.query_params.get("expired") == "1"
        ended = request.query_params.get("ended") == "1"
        notice = (
            "Your session expired: sign in again."
            if expired
            else "Your session ended: the token you signed in with was revoked or replaced."
            if ended
            else ""
        )
        response = self.console.page(
            request,
            "login.html",
            csrf=nonce,
            next=safe_next(request.query_params.get("next", "")),
            notice=notice,
            error="",
            oidc=self.console.oidc is not None,
            session=None,
        )
        self.console.cookie(response, request, LOGIN_COOKIE, nonce, 600)
        return response

    async def login(self, request: Request) -> Response:
        fields = await self.console.fields(request)
        if not same_secret(fields.get("csrf", ""), request.cookies.get(LOGIN_COOKIE, "")):
            return self.console.forbidden(
                request, "The sign-in form was not sent from this console (CSRF check)."
            )
        token = fields.get("token", "").strip()[:_TOKEN_MAX]
        try:
            verified = await self.console.verifier.verify_token(token) if token else None
        except TokensUnreadable:
            return self.console.unavailable(request)
        problem = "That token is not valid." if verified is None else ""
        actor = actor_of(verified) if verified is not None else None
        if actor is not None:
            try:
                self.console.role_of(actor)
            except PilotError as exc:
                problem = exc.message
        if actor is None or problem:
            _log.warning("console sign-in refused: %s", problem)
            return self.console.page(
                request,
                "login.html",
                401,
                csrf=fields.get("csrf", ""),
                next=safe_next(fields.get("next", "")),
                notice="",
                error=problem,
                oidc=self.console.oidc is not None,
                session=None,
            )
        response = RedirectResponse(safe_next(fields.get("next", "")) or "/console/workflows", 303)
        # A static token's session is bound to that token (current() checks it on every request).
        bound = token_fingerprint(hash_secret(token)) if actor.kind == "token" else ""
        await self._signed_in(response, request, actor, bound)
        response.delete_cookie(LOGIN_COOKIE, path="/console")
        return response

    async def _signed_in(self, response: Response, request: Request, actor: Actor, token: str = "") -> None:
        key, _ = await anyio.to_thread.run_sync(self.console.sessions.open, actor, token)
        _log.info("console: %s signed in", actor.label)
        # The cookie outlives the session a little, so the next page can say it expired (the
        # server's expiry is what counts).
        lifetime = int(self.console.sessions.lifetime.total_seconds()) + _EXPIRY_NOTICE_SECONDS
        self.console.cookie(response, request, COOKIE, key, lifetime)

    async def oidc_start(self, request: Request) -> Response:
        if self.console.oidc is None:
            return self.console.page(
                request, "error.html", 404, title="Not found", message="No such page.", session=None
            )
        try:
            client = request.client.host if request.client else ""
            key, url = await self.console.oidc.start(safe_next(request.query_params.get("next", "")), client)
        except OidcRefused as exc:
            return self._oidc_failed(request, exc, 503 if isinstance(exc, OidcBusy) else 502)
        response = RedirectResponse(url, 303)
        # SameSite=Lax, not Strict: the provider sends the browser back with a top-level GET from
        # its own site, and a Strict cookie is not sent on such a cross-site navigation, so the
        # callback could never find its attempt. Lax sends it on top-level GETs only.
        response.set_cookie(
            OIDC_COOKIE,
            key,
            max_age=ATTEMPT_SECONDS,
            path="/console/oidc",
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="lax",
        )
        return response

    async def oidc_callback(self, request: Request) -> Response:
        if self.console.oidc is None:
            return self.console.page(
                request, "error.html", 404, title="Not found", message="No such page.", session=None
            )
        params = {k: v[:4096] for k, v in request.query_params.items()}
        try:
            actor, target = await self.console.oidc.finish(request.cookies.get(OIDC_COOKIE, ""), params)
            self.console.role_of(actor)
        except PilotError as exc:
            status = 403 if not isinstance(exc, OidcRefused) else 400
            response = self._oidc_failed(request, exc, status)
        else:
            target = target or "/console/workflows"
            # A page that moves on by itself rather than a redirect: this response ends a navigation
            # that started at the provider's site, and the browser would not send the (Strict)
            # session cookie on a redirect within it; the refresh is a navigation from this site.
            response = self.console.page(
                request, "signed_in.html", target=target, who=actor.display or actor.name, session=None
            )
            await self._signed_in(response, request, actor)
        response.delete_cookie(OIDC_COOKIE, path="/console/oidc")
        return response

    def _oidc_failed(self, request: Request, exc: PilotError, status: int) -> Response:
        _log.warning("console OIDC sign-in refused: %s", exc.message)
        return self.console.page(
            request, "oidc_error.html", status, message=exc.message, hint=exc.hint, session=None
        )

    async def logout(self, request: Request) -> Response:
        try:
            session, _ = self.console.sessions.get(request.cookies.get(COOKIE, ""))
        except DatabaseUnavailable:
            return self.console.unavailable(request)
        if session is None:
            return RedirectResponse("/console/login", 303)
        if await self.console.posted(request, session) is None:
            return self.console.forbidden(request, "Sign-out refused: the form carried no valid CSRF token.")
        await anyio.to_thread.run_sync(self.console.sessions.close, request.cookies.get(COOKIE, ""))
        response = RedirectResponse("/console/login", 303)
        response.delete_cookie(COOKIE, path="/console")
        return response
