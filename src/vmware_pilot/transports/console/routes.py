"""The console: its routes, and what every page shares (the signed-in caller, forms, errors).

Every page but the sign-in form needs a session (``sessions``), checked again on every request:
a session signed in with a static token ends once that token is revoked or replaced, and the
role is read now (the token's current role; an OIDC person's from their groups), so a changed
role applies to the next click. A page shows only what the role may read through the MCP tools
(``safety.roles.read_refusal``, the rule the MCP resources follow): the list needs
``list_workflows``, a workflow, its steps and its events ``get_workflow_status``, a gate that or
``approve``. Every POST body is bounded before any form is read (``http_body.FormLimit``: 413
past 1 MiB) and carries the session's CSRF token (the sign-in form a double-submit cookie),
refused with 403 without it. Nothing here writes the store on the event loop.

The pages, by job: sign-in and sign-out (``signin``), the inbox, a workflow and a step's result
with their live updates (``pages``), the gate page with approve and reject (``decisions``: one
request to the service per decision, which makes every check once), rollback and cancel, each
previewed first (``undoing``). Pages render the engine's typed results in plain words
(``words``) and nothing else. With an OIDC client configured (oidc.py), people may also sign in
at the identity provider; that ends in the same session as a token sign-in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from vmware_pilot.app import PilotApp
from vmware_pilot.engine.decision import time_left
from vmware_pilot.errors import DatabaseUnavailable, PilotError
from vmware_pilot.safety.roles import read_refusal
from vmware_pilot.transports.callers import RETRY_AFTER_SECONDS, CallerVerifier, TokensUnreadable
from vmware_pilot.transports.console.decisions import Decisions
from vmware_pilot.transports.console.headers import SecurityHeaders
from vmware_pilot.transports.console.oidc import OidcLogin
from vmware_pilot.transports.console.pages import Pages
from vmware_pilot.transports.console.plumbing import Caller, Denied, RoleOf, requested_id
from vmware_pilot.transports.console.sessions import (
    COOKIE,
    Session,
    SessionBook,
    same_secret,
    token_fingerprint,
)
from vmware_pilot.transports.console.signin import SignIn
from vmware_pilot.transports.console.undoing import Undoing
from vmware_pilot.transports.console.words import (
    change_lines,
    evidence_line,
    for_people,
    preview_line,
    state_look,
)
from vmware_pilot.transports.http_body import FormLimit

__all__ = ["Console", "mount_console"]

_log = logging.getLogger("vmware_pilot.console")
_HERE = Path(__file__).parent
T = TypeVar("T")


class Console:
    """One console over one app: the shared plumbing, and the page groups that hold the routes."""

    def __init__(
        self, app: PilotApp, verifier: CallerVerifier, role_of: RoleOf, oidc: OidcLogin | None = None
    ) -> None:
        self.app = app
        self.oidc = oidc
        self.verifier = verifier
        self.role_of = role_of
        self.sessions = SessionBook(app.sql.sessions, app.settings.console_session_minutes)
        self.templates = Jinja2Templates(directory=str(_HERE / "templates"))
        self.templates.env.globals.update(
            change_lines=change_lines,
            evidence_line=evidence_line,
            for_people=for_people,
            time_left=time_left,
            preview_line=preview_line,
            state_look=state_look,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self.signin = SignIn(self)
        self.pages = Pages(self)
        self.decisions = Decisions(self)
        self.undoing = Undoing(self)

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def current(self, session: Session) -> Session | None:
        """``session`` with its person as they stand now, or None when it no longer holds: a static
        token's session ends with that token (revoked, or replaced under the same name), and
        carries the token's current role."""
        actor = session.actor
        if actor.kind != "token":
            return session
        entry = self.verifier.token_named(actor.name)
        if entry is None or not same_secret(token_fingerprint(entry.hash), session.token):
            return None
        return replace(session, actor=replace(actor, role=entry.role))

    def caller(self, request: Request, reads: tuple[str, ...] = ()) -> Caller:
        """The signed-in person and role, allowed to see what ``reads`` show; raises ``Denied``
        with the redirect to the sign-in form (saying why the session ended) or the refusal."""
        try:
            found, expired = self.sessions.get(request.cookies.get(COOKIE, ""))
            session = self.current(found) if found is not None else None
        except (DatabaseUnavailable, TokensUnreadable):  # the session may well hold: nothing assumed
            raise Denied(self.unavailable(request)) from None
        if session is None:
            target = quote(request.url.path, safe="/")
            why = "&expired=1" if expired else "&ended=1" if found is not None else ""
            raise Denied(RedirectResponse(f"/console/login?next={target}{why}", status_code=303))
        try:
            role = self.role_of(session.actor)
        except PilotError as exc:
            raise Denied(self.forbidden(request, f"{exc.message}. {exc.hint}".strip())) from None
        refusal = read_refusal(session.actor, role, reads) if reads else None
        if refusal is not None:
            raise Denied(self.forbidden(request, f"{refusal.message} {refusal.hint}", session))
        return Caller(session, role)

    @staticmethod
    async def fields(request: Request) -> dict[str, str]:
        """The fields of a posted form (its body already bounded and checked by ``FormLimit``)."""
        form = await request.form()
        return {k: v for k, v in form.items() if isinstance(v, str)}

    @classmethod
    async def posted(cls, request: Request, session: Session) -> dict[str, str] | None:
        """The form fields of a POST, or None when its CSRF token is missing or wrong."""
        fields = await cls.fields(request)
        return fields if same_secret(fields.get("csrf", ""), session.csrf) else None

    async def decision_form(self, request: Request, what: str) -> tuple[Caller, str, dict[str, str]]:
        """A posted form: the signed-in person, the workflow and the form's fields; raises
        ``Denied`` with the sign-in redirect, or the refusal of a form without a valid CSRF token."""
        caller = self.caller(request)
        fields = await self.posted(request, caller.session)
        if fields is None:
            raise Denied(self.forbidden(request, f"{what} refused: the form carried no valid CSRF token."))
        return caller, requested_id(request), fields

    def forbidden(self, request: Request, why: str, session: Session | None = None) -> Response:
        return self.page(request, "error.html", 403, title="Refused", message=why, session=session)

    def unavailable(self, request: Request) -> Response:
        """503 + Retry-After while the sessions or tokens cannot be read (the database is away);
        what is wrong is in the server's log, not on a page."""
        response = self.page(
            request,
            "error.html",
            503,
            title="Unavailable",
            message="Pilot's database is unavailable right now; try again in a moment.",
            session=None,
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    @staticmethod
    def cookie(response: Response, request: Request, name: str, value: str, seconds: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=seconds,
            path="/console",
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="strict",
        )

    def detach(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` (an approval or a rollback: it may dispatch for minutes) after the answer."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            _log.warning("console decision ended with: %s", getattr(exc, "message", exc))

    def stream_refusal(self, request: Request, reads: tuple[str, ...]) -> Response | None:
        try:
            self.caller(request, reads)
        except Denied as denied:
            if denied.response.status_code == 303:
                return Response("sign in first", 401, media_type="text/plain")
            return Response("your role may not read this", 403, media_type="text/plain")
        return None

    def still(self, request: Request, reads: tuple[str, ...]) -> Callable[[], bool]:
        """Whether the request's session still holds and may still read the stream (asked again
        by a long event stream: signed out, token revoked, role changed)."""

        def holds() -> bool:
            try:
                self.caller(request, reads)
            except Denied:
                return False
            return True

        return holds

    @staticmethod
    async def _denied(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Denied)
        return exc.response

    def asgi(self) -> Starlette:
        wid = "/workflows/{workflow_id:str}"
        routes = [
            Route("/", self.pages.home),
            Route("/login", self.signin.login_form, methods=["GET"]),
            Route("/login", self.signin.login, methods=["POST"]),
            Route("/logout", self.signin.logout, methods=["POST"]),
            Route("/oidc/start", self.signin.oidc_start, methods=["GET"]),
            Route("/oidc/callback", self.signin.oidc_callback, methods=["GET"]),
            Route("/workflows", self.pages.workflows),
            Route("/events", self.pages.list_events),
            Route(wid, self.pages.workflow),
            Route(wid + "/gate", self.decisions.gate),
            Route(wid + "/approve", self.decisions.approve, methods=["POST"]),
            Route(wid + "/reject", self.decisions.reject, methods=["POST"]),
            Route(wid + "/rollback", self.undoing.rollback_preview, methods=["GET"]),
            Route(wid + "/rollback", self.undoing.rollback, methods=["POST"]),
            Route(wid + "/cancel", self.undoing.cancel_preview, methods=["GET"]),
            Route(wid + "/cancel", self.undoing.cancel, methods=["POST"]),
            Route(wid + "/events", self.pages.events),
            Route(wid + "/steps/{index:int}", self.pages.step_result),
            Mount("/static", app=StaticFiles(directory=str(_HERE / "static")), name="static"),
        ]
        return Starlette(routes=routes, exception_handlers={Denied: self._denied})


def mount_console(
    starlette: Starlette,
    app: PilotApp,
    verifier: CallerVerifier,
    role_of: RoleOf,
    oidc: OidcLogin | None = None,
) -> Console:
    """Serve the console under ``/console`` of the transport's Starlette app (with ``oidc``, people
    may also sign in at the identity provider); every POST body bounded first (``FormLimit``)."""
    console = Console(app, verifier, role_of, oidc)
    starlette.router.routes.insert(0, Mount("/console", app=SecurityHeaders(FormLimit(console.asgi()))))
    return console
