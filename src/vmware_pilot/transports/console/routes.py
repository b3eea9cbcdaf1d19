"""The console's pages and forms: sign-in, workflows, one workflow, a gate, approve and reject.

Every page but the sign-in form needs a session (``sessions``); every POST carries the session's
CSRF token (the sign-in form a double-submit cookie) and is refused with 403 without it. Deciding
a gate follows the same rules as the MCP ``approve`` tool, in the same code: the caller's role
(``safety.duties.approve_refusal``), then the engine's checks (``engine.execution.approval.precheck``:
expiry, the plan digest the page showed, four eyes) and the engine's approve path, with the
signed-in person as the approver. Pages render the engine's typed results and nothing else.
With an OIDC client configured (oidc.py), people may also sign in at the identity provider; that
ends in the same session as a token sign-in.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.engine.execution.approval import precheck, release_notice
from vmware_pilot.engine.gateview import GateView, summarize_result
from vmware_pilot.errors import PilotError, WorkflowNotFound
from vmware_pilot.results import StatusView, result_of
from vmware_pilot.safety.duties import Role, approve_refusal, tool_refusal
from vmware_pilot.safety.redaction import redact
from vmware_pilot.transports.callers import actor_of
from vmware_pilot.transports.console.events import workflow_events, workflows_events
from vmware_pilot.transports.console.headers import SecurityHeaders
from vmware_pilot.transports.console.oidc import ATTEMPT_SECONDS, OidcLogin, OidcRefused
from vmware_pilot.transports.console.sessions import (
    COOKIE,
    LOGIN_COOKIE,
    OIDC_COOKIE,
    Session,
    SessionBook,
    same_secret,
)

__all__ = ["Console", "mount_console"]

_log = logging.getLogger("vmware_pilot.console")
_HERE = Path(__file__).parent
PAGE_SIZE: Final = 20
_AUDIT_TAIL: Final = 20
_TOKEN_MAX: Final = 8192
_REASON_MAX: Final = 2000
_EXPIRY_NOTICE_SECONDS: Final = 600

RoleOf = Callable[[Actor], Role]


class Console:
    def __init__(self, app: PilotApp, verifier: Any, role_of: RoleOf, oidc: OidcLogin | None = None) -> None:
        self.app = app
        self.oidc = oidc
        self.verifier = verifier
        self.role_of = role_of
        self.sessions = SessionBook(app.store, app.settings.console_session_minutes)
        self.templates = Jinja2Templates(directory=str(_HERE / "templates"))
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- plumbing ---------------------------------------------------------------------------
    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def session_of(self, request: Request) -> tuple[Session | None, Response | None]:
        """The signed-in session, or the redirect to the sign-in form (saying when it expired)."""
        session, expired = self.sessions.get(request.cookies.get(COOKIE, ""))
        if session is not None:
            return session, None
        target = quote(request.url.path, safe="/")
        url = f"/console/login?next={target}" + ("&expired=1" if expired else "")
        return None, RedirectResponse(url, status_code=303)

    @staticmethod
    async def posted(request: Request, session: Session) -> dict[str, str] | None:
        """The form fields of a POST, or None when its CSRF token is missing or wrong."""
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        return fields if same_secret(fields.get("csrf", ""), session.csrf) else None

    def forbidden(self, request: Request, why: str) -> Response:
        return self.page(request, "error.html", 403, title="Refused", message=why, session=None)

    # --- sign-in ----------------------------------------------------------------------------
    async def login_form(self, request: Request) -> Response:
        nonce = secrets.token_urlsafe(32)
        expired = request.query_params.get("expired") == "1"
        response = self.page(
            request,
            "login.html",
            csrf=nonce,
            next=_safe_next(request.query_params.get("next", "")),
            notice="Your session expired: sign in again." if expired else "",
            error="",
            oidc=self.oidc is not None,
            session=None,
        )
        self._cookie(response, request, LOGIN_COOKIE, nonce, 600)
        return response

    async def login(self, request: Request) -> Response:
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        if not same_secret(fields.get("csrf", ""), request.cookies.get(LOGIN_COOKIE, "")):
            return self.forbidden(request, "The sign-in form was not sent from this console (CSRF check).")
        token = fields.get("token", "").strip()[:_TOKEN_MAX]
        verified = await self.verifier.verify_token(token) if token else None
        problem = "That token is not valid." if verified is None else ""
        actor = actor_of(verified) if verified is not None else None
        if actor is not None:
            try:
                self.role_of(actor)
            except PilotError as exc:
                problem = exc.message
        if actor is None or problem:
            _log.warning("console sign-in refused: %s", problem)
            return self.page(
                request,
                "login.html",
                401,
                csrf=fields.get("csrf", ""),
                next=_safe_next(fields.get("next", "")),
                notice="",
                error=problem,
                oidc=self.oidc is not None,
                session=None,
            )
        response = RedirectResponse(_safe_next(fields.get("next", "")) or "/console/workflows", 303)
        self._signed_in(response, request, actor)
        response.delete_cookie(LOGIN_COOKIE, path="/console")
        return response

    def _signed_in(self, response: Response, request: Request, actor: Actor) -> None:
        key, _ = self.sessions.open(actor)
        _log.info("console: %s signed in", actor.label)
        # The cookie outlives the session a little, so the next page can say it expired (the
        # server's expiry is what counts).
        lifetime = int(self.sessions.lifetime.total_seconds()) + _EXPIRY_NOTICE_SECONDS
        self._cookie(response, request, COOKIE, key, lifetime)

    # --- sign-in through the identity provider (oidc.py) ------------------------------------
    async def oidc_start(self, request: Request) -> Response:
        if self.oidc is None:
            return self.page(
                request, "error.html", 404, title="Not found", message="No such page.", session=None
            )
        try:
            key, url = await self.oidc.start(_safe_next(request.query_params.get("next", "")))
        except OidcRefused as exc:
            return self._oidc_failed(request, exc, 502)
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
        if self.oidc is None:
            return self.page(
                request, "error.html", 404, title="Not found", message="No such page.", session=None
            )
        params = {k: v[:4096] for k, v in request.query_params.items()}
        try:
            actor, target = await self.oidc.finish(request.cookies.get(OIDC_COOKIE, ""), params)
            self.role_of(actor)
        except PilotError as exc:
            status = 403 if not isinstance(exc, OidcRefused) else 400
            response = self._oidc_failed(request, exc, status)
        else:
            target = target or "/console/workflows"
            # A page that moves on by itself rather than a redirect: this response ends a navigation
            # that started at the provider's site, and the browser would not send the (Strict)
            # session cookie on a redirect within it; the refresh is a navigation from this site.
            response = self.page(
                request, "signed_in.html", target=target, who=actor.display or actor.name, session=None
            )
            self._signed_in(response, request, actor)
        response.delete_cookie(OIDC_COOKIE, path="/console/oidc")
        return response

    def _oidc_failed(self, request: Request, exc: PilotError, status: int) -> Response:
        _log.warning("console OIDC sign-in refused: %s", exc.message)
        return self.page(request, "oidc_error.html", status, message=exc.message, hint=exc.hint, session=None)

    async def logout(self, request: Request) -> Response:
        session, redirect = self.session_of(request)
        if session is None:
            return redirect or RedirectResponse("/console/login", 303)
        if await self.posted(request, session) is None:
            return self.forbidden(request, "Sign-out refused: the form carried no valid CSRF token.")
        self.sessions.close(request.cookies.get(COOKIE, ""))
        response = RedirectResponse("/console/login", 303)
        response.delete_cookie(COOKIE, path="/console")
        return response

    @staticmethod
    def _cookie(response: Response, request: Request, name: str, value: str, seconds: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=seconds,
            path="/console",
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="strict",
        )

    # --- pages ------------------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        return RedirectResponse("/console/workflows", 303)

    async def workflows(self, request: Request) -> Response:
        session, redirect = self.session_of(request)
        if session is None:
            return redirect  # type: ignore[return-value]
        wanted = request.query_params.get("state", "")
        states = [WorkflowState(wanted)] if wanted in {s.value for s in WorkflowState} else None
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        rows = self.app.store.list_all(PAGE_SIZE + 1, (page - 1) * PAGE_SIZE, states)
        return self.page(
            request,
            "workflows.html",
            session=session,
            rows=[dict(r) for r in rows[:PAGE_SIZE]],
            more=len(rows) > PAGE_SIZE,
            page=page,
            state=wanted if states else "",
            states=[s.value for s in WorkflowState],
        )

    @staticmethod
    def _id(request: Request) -> str:
        return str(request.path_params["workflow_id"])

    async def workflow(self, request: Request) -> Response:
        session, redirect = self.session_of(request)
        if session is None:
            return redirect  # type: ignore[return-value]
        try:
            # The version before the read: a change in between makes the page reload, never stick.
            wf = self.app.store.load(self._id(request))
            version = wf.version
            status = StatusView.model_validate(
                redact(self.app.service.get_workflow_status(self._id(request)))
            )
        except WorkflowNotFound as exc:
            return self.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        summaries = {
            s.index: summarize_result(s.result) if s.result is not None else "" for s in status.steps
        }
        return self.page(
            request,
            "workflow.html",
            session=session,
            wf=status,
            summaries=summaries,
            version=version,
            audit=status.audit_log[-_AUDIT_TAIL:],
            notice=request.query_params.get("notice", "")[:200],
            released=release_notice(wf, self.app.dispatcher is not None),
        )

    async def step_result(self, request: Request) -> Response:
        session, redirect = self.session_of(request)
        if session is None:
            return redirect  # type: ignore[return-value]
        try:
            status = result_of(StatusView, self.app.service.get_workflow_status(self._id(request)))
            step = status.steps[int(request.path_params["index"])]
        except (WorkflowNotFound, IndexError, ValueError):
            return self.page(
                request, "error.html", 404, title="Not found", message="No such step.", session=session
            )
        return self.page(request, "result.html", session=session, wf=status, step=redact(step.payload()))

    async def gate(self, request: Request, error: str = "", status: int = 200) -> Response:
        session, redirect = self.session_of(request)
        if session is None:
            return redirect  # type: ignore[return-value]
        workflow_id = self._id(request)
        try:
            view = GateView.model_validate(await self.app.service.show_gate(session.actor, workflow_id))
        except WorkflowNotFound as exc:
            return self.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        except PilotError:
            return RedirectResponse(f"/console/workflows/{quote(workflow_id)}", 303)
        refusal = self._refusal(session.actor, workflow_id)
        return self.page(
            request, "gate.html", status, session=session, view=view, error=error, may_decide=refusal
        )

    def _refusal(self, actor: Actor, workflow_id: str) -> str:
        """Why this person may not approve the workflow (empty when they may): the role's rule."""
        try:
            return approve_refusal(self.role_of(actor), actor, self.app.store.load(workflow_id)) or ""
        except PilotError as exc:
            return exc.message

    # --- decisions --------------------------------------------------------------------------
    async def _decision(self, request: Request, what: str) -> tuple[Actor, str, dict[str, str]] | Response:
        """A posted approve or reject form: the signed-in person, the workflow and the form's
        fields; or the sign-in redirect, or the refusal of a form without a valid CSRF token."""
        session, redirect = self.session_of(request)
        if session is None:
            return redirect  # type: ignore[return-value]
        fields = await self.posted(request, session)
        if fields is None:
            return self.forbidden(request, f"{what} refused: the form carried no valid CSRF token.")
        return session.actor, self._id(request), fields

    async def approve(self, request: Request) -> Response:
        decided = await self._decision(request, "Approval")
        if isinstance(decided, Response):
            return decided
        actor, workflow_id, fields = decided
        refusal = self._refusal(actor, workflow_id)
        if refusal:
            return await self.gate(request, f"Refused: {refusal}.", 403)
        digest = fields.get("digest", "")
        acknowledge = fields.get("ack_not_executed") == "yes"
        try:
            precheck(self.app.store.load(workflow_id), actor.label, acknowledge, digest)
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", 409)
        work = self.app.service.approve(
            actor, workflow_id, "", acknowledge, channel="console", expected_digest=digest
        )
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=approved", 303)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            _log.warning("console approval ended with: %s", getattr(exc, "message", exc))

    async def reject(self, request: Request) -> Response:
        decided = await self._decision(request, "Rejection")
        if isinstance(decided, Response):
            return decided
        actor, workflow_id, fields = decided
        try:
            role = self.role_of(actor)
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", 403)
        why_not = tool_refusal(role, "cancel_workflow")
        if why_not:
            return await self.gate(request, f"Refused: {why_not}.", 403)
        try:
            self.app.service.reject(actor, workflow_id, fields.get("reason", "")[:_REASON_MAX])
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", 409)
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=rejected", 303)

    # --- live updates -----------------------------------------------------------------------
    async def events(self, request: Request) -> Response:
        session, _ = self.session_of(request)
        if session is None:
            return Response("sign in first", 401, media_type="text/plain")
        return workflow_events(self.app, self._id(request), request, self._still(request))

    async def list_events(self, request: Request) -> Response:
        session, _ = self.session_of(request)
        if session is None:
            return Response("sign in first", 401, media_type="text/plain")
        return workflows_events(self.app, request, self._still(request))

    def _still(self, request: Request) -> Callable[[], bool]:
        """Whether the request's session still holds (asked again by a long event stream)."""
        cookie = request.cookies.get(COOKIE, "")
        return lambda: self.sessions.get(cookie)[0] is not None

    def asgi(self) -> Starlette:
        wid = "/workflows/{workflow_id:str}"
        routes = [
            Route("/", self.home),
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/oidc/start", self.oidc_start, methods=["GET"]),
            Route("/oidc/callback", self.oidc_callback, methods=["GET"]),
            Route("/workflows", self.workflows),
            Route("/events", self.list_events),
            Route(wid, self.workflow),
            Route(wid + "/gate", self.gate),
            Route(wid + "/approve", self.approve, methods=["POST"]),
            Route(wid + "/reject", self.reject, methods=["POST"]),
            Route(wid + "/events", self.events),
            Route(wid + "/steps/{index:int}", self.step_result),
            Mount("/static", app=StaticFiles(directory=str(_HERE / "static")), name="static"),
        ]
        return Starlette(routes=routes)


def _safe_next(path: str) -> str:
    """Only a console path is followed after sign-in (never another site)."""
    return path if path.startswith("/console/") and not path.startswith("//") and "\\" not in path else ""


def mount_console(
    starlette: Starlette, app: PilotApp, verifier: Any, role_of: RoleOf, oidc: OidcLogin | None = None
) -> Console:
    """Serve the console under ``/console`` of the transport's Starlette app (with ``oidc``, people
    may also sign in at the identity provider)."""
    console = Console(app, verifier, role_of, oidc)
    starlette.router.routes.insert(0, Mount("/console", app=SecurityHeaders(console.asgi())))
    return console
