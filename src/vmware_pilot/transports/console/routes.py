"""The console's pages and forms: sign-in, the inbox, one workflow, a gate, approve and reject,
rollback and cancel (each previewed first).

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
approve path, with the signed-in person as the approver. The gate page starts with the decision
summary and offers only what this person may do now, saying why not in place of a control
(``decision``); a workflow that ended says how (``outcome``) and offers the next actions its state
and the person's role allow. Rollback and cancel follow the CLI's rules: the service's preview
(its blast radius) first, refused while it has blockers or unmeasured steps (or undo calls without
dispatch), then the service's own path on a confirmed form. Pages render the engine's typed results
in plain words (``words``) and nothing else.
With an OIDC client configured (oidc.py), people may also sign in at the identity provider; that
ends in the same session as a token sign-in.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Coroutine
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
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.decision import time_left
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.approval import precheck, release_notice
from vmware_pilot.errors import DatabaseUnavailable, PilotError, WorkflowNotFound
from vmware_pilot.results import BlastRadius, GateStatus, Preview, Result, StatusView
from vmware_pilot.safety.duties import Role, approve_refusal, tool_refusal
from vmware_pilot.safety.redaction import redact, redact_identity
from vmware_pilot.server.access import read_refusal
from vmware_pilot.transports.callers import RETRY_AFTER_SECONDS, CallerVerifier, TokensUnreadable, actor_of
from vmware_pilot.transports.console import inbox
from vmware_pilot.transports.console.events import workflow_events, workflows_events
from vmware_pilot.transports.console.headers import SecurityHeaders
from vmware_pilot.transports.console.oidc import ATTEMPT_SECONDS, OidcBusy, OidcLogin, OidcRefused
from vmware_pilot.transports.console.outcome import ending
from vmware_pilot.transports.console.sessions import (
    COOKIE,
    LOGIN_COOKIE,
    OIDC_COOKIE,
    Session,
    SessionBook,
    same_secret,
    token_fingerprint,
)
from vmware_pilot.transports.console.words import (
    change_lines,
    evidence_line,
    for_people,
    preview_line,
    state_look,
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
# The states in which a rollback or a cancel can be asked for (domain.transitions).
_ROLLBACK_STATES: Final = frozenset(
    {WorkflowState.PENDING, WorkflowState.RUNNING, WorkflowState.AWAITING_APPROVAL, WorkflowState.FAILED}
)
_CANCEL_STATES: Final = frozenset(
    {
        WorkflowState.DRAFT,
        WorkflowState.PENDING,
        WorkflowState.RUNNING,
        WorkflowState.AWAITING_APPROVAL,
        WorkflowState.ROLLING_BACK,
    }
)

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
        """The inbox: waiting gates first, each row with who asked, targets, risk, verdict, age and
        time left; a search over id, requester, targets and text; a state filter."""
        session = self.caller(request, _LIST).session
        wanted = request.query_params.get("state", "")
        known = [s.value for s in WorkflowState]
        shown = request.query_params.get("page", "1")
        query = request.query_params.get("q", "")[:200]
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
        rows = await asyncio.to_thread(self._inbox, states, query)
        first = (page - 1) * PAGE_SIZE
        return self.page(
            request,
            "workflows.html",
            session=session,
            rows=rows[first : first + PAGE_SIZE],
            more=len(rows) > first + PAGE_SIZE,
            page=page,
            state=wanted if states else "",
            states=known,
            q=query,
            waiting=sum(1 for r in rows if r.waiting),
            scanned=inbox.SCANNED,
        )

    def _inbox(self, states: list[WorkflowState] | None, query: str) -> list[inbox.Row]:
        """The newest ``inbox.SCANNED`` workflows (in ``states``) as inbox rows, matching
        ``query``, waiting gates first."""
        store, catalog = self.app.store, self.app.service.catalog
        now = store.now()
        rows = []
        for summary_row in store.workflows.list_all(inbox.SCANNED, 0, states):
            try:
                rows.append(inbox.row_of(store.workflows.load(str(summary_row["id"])), catalog, now))
            except WorkflowNotFound:
                continue  # deleted between the list and the load
        return inbox.sort_waiting_first(inbox.search(rows, query) if query.strip() else rows)

    @staticmethod
    def _id(request: Request) -> str:
        return str(request.path_params["workflow_id"])

    async def workflow(self, request: Request) -> Response:
        caller = self.caller(request, _STATUS)
        session = caller.session
        try:
            # The version before the read: a change in between makes the page update, never stick.
            wf = await asyncio.to_thread(self.app.store.workflows.load, self._id(request))
            version = wf.version
            read = await asyncio.to_thread(self.app.service.get_workflow_status, self._id(request))
            raw = read.payload()
            status = StatusView.model_validate(_details_named(raw, redact(raw)))
            now = await asyncio.to_thread(self.app.store.now)
        except WorkflowNotFound as exc:
            return self.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        catalog = self.app.service.catalog
        lines = {
            s.index: evidence_line(redact(s.result), s.tool)
            for s in wf.steps
            if s.result is not None and not s.is_gate
        }
        pending = gate_records.pending_gate(wf) if wf.state is WorkflowState.AWAITING_APPROVAL else None
        waiting = next((g for g in status.gates if pending is not None and g.index == pending.index), None)
        return self.page(
            request,
            "workflow.html",
            session=session,
            wf=status,
            lines=lines,
            version=version,
            audit=status.audit_log[-_AUDIT_TAIL:],
            notice=request.query_params.get("notice", "")[:200],
            released=release_notice(wf, self.app.dispatcher is not None),
            ending=ending(wf, catalog),
            display=inbox.display_state(wf, now),
            waiting=waiting,
            mine=waiting is not None
            and any(caller.actor.is_same_person(a.approver) for a in waiting.approvals),
            why=str(wf.params.get("description", "") or ""),
            actions=self._next_actions(caller, wf),
        )

    def _next_actions(self, caller: Caller, wf: Workflow) -> dict[str, str]:
        """What this person may do next about ``wf`` (rollback, cancel): each action's refusal in
        words, "" when they may. Actions that do not apply to the state are left out."""
        actions: dict[str, str] = {}
        rolled_back = wf.state is WorkflowState.FAILED and bool(wf.rollback_results)
        if wf.state in _ROLLBACK_STATES and not rolled_back:
            why = tool_refusal(caller.role, "rollback")
            actions["rollback"] = f"Your role cannot roll back: {why}." if why else ""
        if wf.state in _CANCEL_STATES:
            why = tool_refusal(caller.role, "cancel_workflow")
            actions["cancel"] = f"Your role cannot cancel: {why}." if why else ""
        return actions

    async def step_result(self, request: Request) -> Response:
        session = self.caller(request, _STATUS).session
        try:
            status = self.app.service.get_workflow_status(self._id(request))
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
            view = await self.app.service.show_gate(session.actor, workflow_id)
            wf = await asyncio.to_thread(self.app.store.workflows.load, workflow_id)
        except WorkflowNotFound as exc:
            return self.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        except PilotError:
            return RedirectResponse(f"/console/workflows/{quote(workflow_id)}", 303)
        gate = view.pending() or GateStatus()
        evidence = {
            s.index: evidence_line(redact(s.result), s.tool)
            for s in wf.steps[: max(0, gate.index)]
            if not s.is_gate and s.status in (StepStatus.SUCCESS, StepStatus.FAILED)
        }
        service = self.app.service
        return self.page(
            request,
            "gate.html",
            status,
            session=session,
            view=view,
            gate=gate,
            error=error,
            decision=await asyncio.to_thread(service.decision, workflow_id),
            may=await asyncio.to_thread(
                service.eligibility, caller.actor, workflow_id, caller.role, "console"
            ),
            evidence=evidence,
        )

    def _refusal(self, caller: Caller, workflow_id: str) -> str:
        """Why this person may not approve the workflow (empty when they may): the role's rule."""
        try:
            return (
                approve_refusal(caller.role, caller.actor, self.app.store.workflows.load(workflow_id)) or ""
            )
        except PilotError as exc:
            return exc.message

    # --- decisions --------------------------------------------------------------------------
    async def _decision(self, request: Request, what: str) -> tuple[Caller, str, dict[str, str]]:
        """A posted form: the signed-in person, the workflow and the form's fields; raises
        ``_Denied`` with the sign-in redirect, or the refusal of a form without a valid CSRF token."""
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
        comment = fields.get("comment", "").strip()[:_REASON_MAX]
        try:
            store = self.app.store
            wf, now = (
                await asyncio.to_thread(store.workflows.load, workflow_id),
                await asyncio.to_thread(store.now),
            )
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
            comment=comment,
        )
        self._detach(work)
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=approved", 303)

    def _detach(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (an approval or a rollback: it may dispatch for minutes) after the answer."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            _log.warning("console decision ended with: %s", getattr(exc, "message", exc))

    async def reject(self, request: Request) -> Response:
        caller, workflow_id, fields = await self._decision(request, "Rejection")
        why_not = tool_refusal(caller.role, "cancel_workflow")
        if why_not:
            return await self.gate(request, f"Refused: {why_not}.", 403)
        reason = fields.get("reason", "")[:_REASON_MAX]
        if not reason.strip():
            return await self.gate(
                request, "Refused: a rejection needs a reason; it is written to the audit trail.", 400
            )
        try:
            await anyio.to_thread.run_sync(self.app.service.reject, caller.actor, workflow_id, reason)
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", 409)
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=rejected", 303)

    # --- rollback and cancel: preview first, act on a confirmed form -------------------------
    async def _radius(self, caller: Caller, workflow_id: str, verb: str, ack: bool) -> BlastRadius:
        service = self.app.service
        answer: Result
        if verb == "rollback":
            answer = await service.rollback(caller.actor, workflow_id, False, ack)
        else:
            answer = await service.cancel_workflow(caller.actor, workflow_id, "", False, ack)
        assert isinstance(answer, Preview), answer  # without confirm: always the preview
        return answer.blast_radius

    def _problems(self, verb: str, radius: BlastRadius) -> list[str]:
        """Why ``verb`` cannot go ahead as previewed (the CLI's rules): blockers, unmeasured
        steps, and undo calls that cannot be made without dispatch."""
        problems = [*radius.blockers, *radius.unmeasured]
        if verb == "rollback" and radius.would_roll_back_count and self.app.dispatcher is None:
            problems.append(
                "Pilot undoes steps by calling their skills' undo tools, and this Pilot runs without "
                "dispatch, so every undo would fail"
            )
        return problems

    async def undo_preview(self, request: Request, verb: str, error: str = "", status: int = 200) -> Response:
        caller = self.caller(request, _STATUS)
        workflow_id = self._id(request)
        ack = request.query_params.get("ack") == "1"
        try:
            radius = await self._radius(caller, workflow_id, verb, ack)
        except WorkflowNotFound as exc:
            return self.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=caller.session
            )
        except PilotError as exc:
            return self.page(
                request, "error.html", 409, title="Refused", message=exc.message, session=caller.session
            )
        tool = "rollback" if verb == "rollback" else "cancel_workflow"
        role_says = tool_refusal(caller.role, tool)
        return self.page(
            request,
            "undo.html",
            status,
            session=caller.session,
            verb=verb,
            workflow_id=workflow_id,
            radius=radius,
            problems=self._problems(verb, radius),
            role_says=f"Your role cannot do this: {role_says}." if role_says else "",
            ack=ack,
            error=error,
        )

    async def rollback_preview(self, request: Request) -> Response:
        return await self.undo_preview(request, "rollback")

    async def cancel_preview(self, request: Request) -> Response:
        return await self.undo_preview(request, "cancel")

    async def _undo(self, request: Request, verb: str) -> Response:
        what = "Rollback" if verb == "rollback" else "Cancel"
        caller, workflow_id, fields = await self._decision(request, what)
        tool = "rollback" if verb == "rollback" else "cancel_workflow"
        why_not = tool_refusal(caller.role, tool)
        if why_not:
            return await self.undo_preview(request, verb, f"Refused: {why_not}.", 403)
        if fields.get("confirm") != "yes":
            return await self.undo_preview(
                request, verb, "Refused: tick the box to confirm; nothing was changed.", 400
            )
        ack = fields.get("ack_unknown") == "yes"
        try:
            problems = self._problems(verb, await self._radius(caller, workflow_id, verb, ack))
            if problems:
                return await self.undo_preview(
                    request, verb, f"Refused: {'; '.join(problems)}. Nothing was changed.", 409
                )
            if verb == "cancel":
                reason = fields.get("reason", "").strip()[:_REASON_MAX]
                if not reason:
                    return await self.undo_preview(
                        request, verb, "Refused: say why you cancel; it is written to the audit trail.", 400
                    )
                await self.app.service.cancel_workflow(caller.actor, workflow_id, reason, True, ack)
                return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=cancelled", 303)
        except PilotError as exc:
            return await self.undo_preview(request, verb, f"Refused: {exc.message}", 409)
        self._detach(self.app.service.rollback(caller.actor, workflow_id, True, ack))
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=rollback", 303)

    async def rollback(self, request: Request) -> Response:
        return await self._undo(request, "rollback")

    async def cancel(self, request: Request) -> Response:
        return await self._undo(request, "cancel")

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
            Route(wid + "/rollback", self.rollback_preview, methods=["GET"]),
            Route(wid + "/rollback", self.rollback, methods=["POST"]),
            Route(wid + "/cancel", self.cancel_preview, methods=["GET"]),
            Route(wid + "/cancel", self.cancel, methods=["POST"]),
            Route(wid + "/events", self.events),
            Route(wid + "/steps/{index:int}", self.step_result),
            Mount("/static", app=StaticFiles(directory=str(_HERE / "static")), name="static"),
        ]
        return Starlette(routes=routes, exception_handlers={_Denied: self._denied})


def _details_named(raw: dict[str, Any], shown: dict[str, Any]) -> dict[str, Any]:
    """``shown`` (the status with secrets masked) with its audit details naming their callers
    (``token:alice``): the details are masked at rest already, and scrubbing them again would
    mask the names they mention."""
    for mine, theirs in zip(shown.get("audit_log", []), raw.get("audit_log", []), strict=True):
        mine["detail"] = redact_identity(str(theirs.get("detail", "")))
    return shown


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
