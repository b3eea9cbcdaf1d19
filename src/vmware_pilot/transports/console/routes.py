"""The console's pages and forms: sign-in, workflows, one workflow, a gate, approve and reject.

Every page but the sign-in form needs a session (``sessions``), checked again on every request:
a session signed in with a static token ends once that token is revoked or replaced, and the
role is read now (the token's current role; an OIDC person's from their groups), so a changed
role applies to the next click. A page shows only what the role may read through the MCP tools
(``server.access.read_refusal``, the rule the MCP resources follow): the list needs
``list_workflows``, a workflow, its steps and its events ``get_workflow_status``, a gate that or
``approve``. Every POST body is bounded before any form is read (``http_body.FormLimit``: 413
past 1 MiB) and carries the session's CSRF token (the sign-in form a double-submit cookie),
refused with 403 without it. Nothing here writes the store on the event loop: sign-in, sign-out
and reject run in a worker thread, approve through the engine's runner, which does. Deciding
a gate follows the same rules as the MCP ``approve`` tool, in the same code: the caller's role
(``safety.duties.approve_refusal``), then the engine's checks (``engine.execution.approval.precheck``:
expiry, the plan digest the page showed, which the form must carry, four eyes) and the engine's
approve path, with the signed-in person as the approver. Pages render the engine's typed results and nothing else.
With an OIDC client configured (oidc.py), people may also sign in at the identity provider; that
ends in the same session as a token sign-in.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import anyio.to_thread
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
from vmware_pilot.errors import DatabaseUnavailable, PilotError, WorkflowNotFound
from vmware_pilot.results import StatusView, result_of
from vmware_pilot.safety.duties import Role, approve_refusal, tool_refusal
from vmware_pilot.safety.redaction import redact
from vmware_pilot.server.access import read_refusal
from vmware_pilot.transports.callers import RETRY_AFTER_SECONDS, CallerVerifier, TokensUnreadable, actor_of
from vmware_pilot.transports.console.events import workflow_events, workflows_events
from vmware_pilot.transports.console.headers import SecurityHeaders
from vmware_pilot.transports.console.oidc import ATTEMPT_SECONDS, OidcBusy, OidcLogin, OidcRefused
from vmware_pilot.transports.console.sessions import (
    COOKIE,
    LOGIN_COOKIE,
    OIDC_COOKIE,
    Session,
    SessionBook,
    same_secret,
    token_fingerprint,
)
from vmware_pilot.transports.http_body import FormLimit
from vmware_pilot.transports.tokens import hash_secret

__all__ = ["Console", "mount_console"]

_log = logging.getLogger("vmware_pilot.console")
_HERE = Path(__file__).parent
PAGE_SIZE: Final = 20
_AUDIT_TAIL: Final = 20
_TOKEN_MAX: Final = 8192
_REASON_MAX: Final = 2000
_EXPIRY_NOTICE_SECONDS: Final = 600
_MAX_PAGE: Final = 1_000_000

RoleOf = Callable[[Actor], Role]
# What each page shows is what these tools show: the role needs one of them (read_refusal).
_LIST: Final = ("list_workflows",)
_STATUS: Final = ("get_workflow_status",)
_GATE: Final = ("get_workflow_status", "approve")


@dataclass(frozen=True)
class Caller:
    """The signed-in person as of this request: the session (its actor as it stands now) and role."""

    session: Session
    role: Role

    @property
    def actor(self) -> Actor:
        return self.session.actor


class _Denied(Exception):
    """Why a request with a session may not go on: the response to send instead."""

    def __init__(self, response: Response) -> None:
        super().__init__()
        self.response = response


class Console:
    def __init__(
        self, app: PilotApp, verifier: CallerVerifier, role_of: RoleOf, oidc: OidcLogin | None = None
    ) -> None:
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
        """The signed-in person and role, allowed to see what ``reads`` show; raises ``_Denied``
        with the redirect to the sign-in form (saying why the session ended) or the refusal."""
        try:
            found, expired = self.sessions.get(request.cookies.get(COOKIE, ""))
            session = self.current(found) if found is not None else None
        except (DatabaseUnavailable, TokensUnreadable):  # the session may well hold: nothing assumed
            raise _Denied(self.unavailable(request)) from None
        if session is None:
            target = quote(request.url.path, safe="/")
            why = "&expired=1" if expired else "&ended=1" if found is not None else ""
            raise _Denied(RedirectResponse(f"/console/login?next={target}{why}", status_code=303))
        try:
            role = self.role_of(session.actor)
        except PilotError as exc:
            raise _Denied(self.forbidden(request, f"{exc.message}. {exc.hint}".strip())) from None
        refusal = read_refusal(session.actor, role, reads) if reads else None
        if refusal is not None:
            raise _Denied(self.forbidden(request, f"{refusal.message} {refusal.hint}", session))
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

    # --- sign-in ----------------------------------------------------------------------------
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
        response = self.page(
            request,
            "login.html",
            csrf=nonce,
            next=_safe_next(request.query_params.get("next", "")),
            notice=notice,
            error="",
            oidc=self.oidc is not None,
            session=None,
        )
        self._cookie(response, request, LOGIN_COOKIE, nonce, 600)
        return response

    async def login(self, request: Request) -> Response:
        fields = await self.fields(request)
        if not same_secret(fields.get("csrf", ""), request.cookies.get(LOGIN_COOKIE, "")):
            return self.forbidden(request, "The sign-in form was not sent from this console (CSRF check).")
        token = fields.get("token", "").strip()[:_TOKEN_MAX]
        try:
            verified = await self.verifier.verify_token(token) if token else None
        except TokensUnreadable:
            return self.unavailable(request)
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
        # A static token's session is bound to that token (current() checks it on every request).
        bound = token_fingerprint(hash_secret(token)) if actor.kind == "token" else ""
        await self._signed_in(response, request, actor, bound)
        response.delete_cookie(LOGIN_COOKIE, path="/console")
        return response

    async def _signed_in(self, response: Response, request: Request, actor: Actor, token: str = "") -> None:
        key, _ = await anyio.to_thread.run_sync(self.sessions.open, actor, token)
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
            client = request.client.host if request.client else ""
            key, url = await self.oidc.start(_safe_next(request.query_params.get("next", "")), client)
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
            await self._signed_in(response, request, actor)
        response.delete_cookie(OIDC_COOKIE, path="/console/oidc")
        return response

    def _oidc_failed(self, request: Request, exc: PilotError, status: int) -> Response:
        _log.warning("console OIDC sign-in refused: %s", exc.message)
        return self.page(request, "oidc_error.html", status, message=exc.message, hint=exc.hint, session=None)

    async def logout(self, request: Request) -> Response:
        try:
            session, _ = self.sessions.get(request.cookies.get(COOKIE, ""))
        except DatabaseUnavailable:
            return self.unavailable(request)
        if session is None:
            return RedirectResponse("/console/login", 303)
        if await self.posted(request, session) is None:
            return self.forbidden(request, "Sign-out refused: the form carried no valid CSRF token.")
        await anyio.to_thread.run_sync(self.sessions.close, request.cookies.get(COOKIE, ""))
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
        session = self.caller(request, _LIST).session
        wanted = request.query_params.get("state", "")
        known = [s.value for s in WorkflowState]
        shown = request.query_params.get("page", "1")
        problem = (
            f"state must be one of {', '.join(known)}, or empty for any (got {wanted[:40]!r})."
            if wanted and wanted not in known
            else f"page must be a whole number from 1 to {_MAX_PAGE:,} (got {shown[:40]!r})."
            if not (shown.isascii() and shown.isdigit() and 1 <= int(shown) <= _MAX_PAGE)
            else ""
        )
        if problem:
            return self.page(
                request, "error.html", 400, title="Bad request", message=problem, session=session
            )
        states = [WorkflowState(wanted)] if wanted else None
        page = int(shown)
        rows = self.app.store.list_all(PAGE_SIZE + 1, (page - 1) * PAGE_SIZE, states)
        return self.page(
            request,
            "workflows.html",
            session=session,
            rows=[dict(r) for r in rows[:PAGE_SIZE]],
            more=len(rows) > PAGE_SIZE,
            page=page,
            state=wanted if states else "",
            states=known,
        )

    @staticmethod
    def _id(request: Request) -> str:
        return str(request.path_params["workflow_id"])

    async def workflow(self, request: Request) -> Response:
        session = self.caller(request, _STATUS).session
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
        session = self.caller(request, _STATUS).session
        try:
            status = result_of(StatusView, self.app.service.get_workflow_status(self._id(request)))
            step = status.steps[int(request.path_params["index"])]
        except (WorkflowNotFound, IndexError, ValueError):
            return self.page(
                request, "error.html", 404, title="Not found", message="No such step.", session=session
            )
        return self.page(request, "result.html", session=session, wf=status, step=redact(step.payload()))

    async def gate(self, request: Request, error: str = "", status: int = 200) -> Response:
        caller = self.caller(request, _GATE)
        session = caller.session
        workflow_id = self._id(request)
        try:
            view = GateView.model_validate(await self.app.service.show_gate(session.actor, workflow_id))
        except WorkflowNotFound as exc:
            return self.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        except PilotError:
            return RedirectResponse(f"/console/workflows/{quote(workflow_id)}", 303)
        refusal = self._refusal(caller, workflow_id)
        return self.page(
            request, "gate.html", status, session=session, view=view, error=error, may_decide=refusal
        )

    def _refusal(self, caller: Caller, workflow_id: str) -> str:
        """Why this person may not approve the workflow (empty when they may): the role's rule."""
        try:
            return approve_refusal(caller.role, caller.actor, self.app.store.load(workflow_id)) or ""
        except PilotError as exc:
            return exc.message

    # --- decisions --------------------------------------------------------------------------
    async def _decision(self, request: Request, what: str) -> tuple[Caller, str, dict[str, str]]:
        """A posted approve or reject form: the signed-in person, the workflow and the form's
        fields; raises ``_Denied`` with the sign-in redirect, or the refusal of a form without a
        valid CSRF token."""
        caller = self.caller(request)
        fields = await self.posted(request, caller.session)
        if fields is None:
            raise _Denied(self.forbidden(request, f"{what} refused: the form carried no valid CSRF token."))
        return caller, self._id(request), fields

    async def approve(self, request: Request) -> Response:
        caller, workflow_id, fields = await self._decision(request, "Approval")
        actor = caller.actor
        refusal = self._refusal(caller, workflow_id)
        if refusal:
            return await self.gate(request, f"Refused: {refusal}.", 403)
        digest = fields.get("digest", "").strip()
        if not digest:
            # Without the digest of the plan the page showed, the approval would bind to whatever
            # the plan is now, which the person never saw.
            return await self.gate(
                request,
                "Refused: the form carried no plan digest, so it cannot show which plan you approve. "
                "Approve from this page, which shows the plan and sends its digest.",
                400,
            )
        acknowledge = fields.get("ack_not_executed") == "yes"
        step = fields.get("gate_step", "")
        # The form names the gate it showed (and its digest, which is bound to that gate too).
        gate_step = int(step) if step.isascii() and step.isdigit() and len(step) <= 6 else None
        # Approving despite a failing prediction takes the box ticked and a reason.
        despite = fields.get("ack_failure_reason", "").strip() if fields.get("ack_failure") == "yes" else ""
        try:
            store = self.app.store
            wf, now = await asyncio.to_thread(store.load, workflow_id), await asyncio.to_thread(store.now)
            precheck(
                wf,
                actor.label,
                acknowledge,
                digest,
                now=now,
                gate_step=gate_step,
                acknowledge_failure=despite,
            )
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", 409)
        work = self.app.service.approve(
            actor,
            workflow_id,
            "",
            acknowledge,
            channel="console",
            expected_digest=digest,
            gate_step=gate_step,
            acknowledge_failure=despite,
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
        caller, workflow_id, fields = await self._decision(request, "Rejection")
        why_not = tool_refusal(caller.role, "cancel_workflow")
        if why_not:
            return await self.gate(request, f"Refused: {why_not}.", 403)
        reason = fields.get("reason", "")[:_REASON_MAX]
        try:
            await anyio.to_thread.run_sync(self.app.service.reject, caller.actor, workflow_id, reason)
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", 409)
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=rejected", 303)

    # --- live updates -----------------------------------------------------------------------
    async def events(self, request: Request) -> Response:
        refused = self._stream_refusal(request, _STATUS)
        if refused is not None:
            return refused
        return workflow_events(self.app, self._id(request), request, self._still(request, _STATUS))

    async def list_events(self, request: Request) -> Response:
        refused = self._stream_refusal(request, _LIST)
        if refused is not None:
            return refused
        return workflows_events(self.app, request, self._still(request, _LIST))

    def _stream_refusal(self, request: Request, reads: tuple[str, ...]) -> Response | None:
        try:
            self.caller(request, reads)
        except _Denied as denied:
            if denied.response.status_code == 303:
                return Response("sign in first", 401, media_type="text/plain")
            return Response("your role may not read this", 403, media_type="text/plain")
        return None

    def _still(self, request: Request, reads: tuple[str, ...]) -> Callable[[], bool]:
        """Whether the request's session still holds and may still read the stream (asked again
        by a long event stream: signed out, token revoked, role changed)."""

        def holds() -> bool:
            try:
                self.caller(request, reads)
            except _Denied:
                return False
            return True

        return holds

    @staticmethod
    async def _denied(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _Denied)
        return exc.response

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
        return Starlette(routes=routes, exception_handlers={_Denied: self._denied})


def _safe_next(path: str) -> str:
    """Only a console path is followed after sign-in (never another site)."""
    return path if path.startswith("/console/") and not path.startswith("//") and "\\" not in path else ""


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
