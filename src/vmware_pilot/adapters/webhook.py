"""Webhook notifications: a signed POST when a workflow needs a person, changes at a gate or ends.

Events: ``awaiting_approval`` (step = the gate), ``drift_detected`` (or another hold's event:
a check right before a write opened its gate again, engine/execution/holds.py; step = the gate,
``hold`` says why; otherwise as ``awaiting_approval``), ``approval_partial`` (an approval recorded, more
needed), ``gate_expired`` (the gate expired undecided; once, by whichever Pilot notices),
``plan_changed`` (the gate's prediction changed and earlier approvals no longer count),
``completed``, ``failed`` (step = the first step that failed or whose effect is unknown),
``rolled_back`` / ``rollback_incomplete`` and ``cancelled``. Every body is ``{event, workflow_id,
workflow_type, state, step?, link?, requested_by, requested_via?, description, actor, …, ts,
event_id}``: ``link`` (with a public URL configured) is the workflow's page in the web console
(its gate page for gate events; sign-in required, never an approval by itself), ``requested_by``
the creator, ``requested_via`` the agent it asked through, ``actor`` who caused the event. Gate
events add the approvals given and missing; ``awaiting_approval`` adds ``decision`` (the
decision summary, engine.decision), ``gate`` (what the gate releases: the gate view's released
steps with params masked, risk tier and undo, the targets' state, the plan digest, the alerts as
``{severity, kind, object, text}``) and ``gate_url``; ``failed`` adds ``error`` (in full, bounded,
secrets masked), ``failed_step``, ``changed`` (steps that succeeded and are not reads) and
``effect_unknown``; ``cancelled`` adds ``reason`` and, after a rejection, ``rejected`` and
``rejected_by``. With ``VMWARE_PILOT_NOTIFY_FORMAT`` ``slack`` or ``teams`` the body is that
chat's message instead (adapters/chat.py), for an incoming-webhook URL with no relay. With a
secret, header ``X-Pilot-Signature: sha256=<hex>`` is the HMAC-SHA256 of the raw body. Every attempt carries ``Idempotency-Key: <event_id>`` (stable per event, across retries and
processes). A redirect is never followed: a 3xx answer is a failed attempt.

Delivery goes through a transactional outbox (store/outbox.py): the event row is written in the
transaction of the workflow change that announces it, so a process that dies after its commit loses
nothing; a background thread in every Pilot process claims due rows (one sender per row at a time
across processes) and POSTs them with bounded retries and backoff. Delivery is at least once. A
slow, failing or unreachable receiver never blocks, slows or fails a workflow. The secret is never
logged and never stored: rows hold the unsigned body, signed at send time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol
from urllib.parse import urlsplit

from vmware_pilot.adapters.chat import render
from vmware_pilot.domain.clock import iso, utcnow
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.execution import gate_records, holds
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.errors import DatabaseUnavailable
from vmware_pilot.results import Decision
from vmware_pilot.safety.redaction import redact, redact_text

__all__ = [
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "EventSources",
    "Notifier",
    "Outbox",
    "encode",
    "events_for",
    "gate_link",
    "gate_summary",
    "sign",
    "workflow_link",
]

_log = logging.getLogger(__name__)
W = WorkflowState

SIGNATURE_HEADER: Final = "X-Pilot-Signature"
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx answer is the receiver's answer, not a new address: following it would send the
    signed event elsewhere (and a 301/302/303 turns the POST into a GET without its body, which
    would then count as delivered). The 3xx is raised as an HTTPError: a failed attempt."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# Proxies from the environment as urlopen would, but never a redirect.
_OPENER: Final = urllib.request.build_opener(_NoRedirects)


def sign(secret: str, body: bytes) -> str:
    """The signature header value for ``body``: ``sha256=<hex HMAC-SHA256 with secret>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# The gate view (engine.execution.gate_records.gate_view) of a workflow waiting at a gate.
DescribeGate = Callable[[Workflow], GateView]
# The decision summary (engine.decision.decision_of) of the gate a workflow waits at, or None.
DecideGate = Callable[[Workflow], Decision | None]
# Whether a step only reads (safety.classify), for what a failed run already changed.
IsRead = Callable[[Step], bool]

# Bounds of the texts an event carries (a chat message has its own, smaller ones: adapters/chat.py).
_ERROR_MAX: Final = 4000
_TEXT_MAX: Final = 1000


def _bounded(text: object, limit: int = _TEXT_MAX) -> str:
    line = redact_text(str(text or ""))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def gate_summary(view: GateView) -> dict[str, Any]:
    """The part of a gate view a notification carries (bounded: no previews' raw payloads)."""
    gate = view.pending()
    return {
        # What approving is predicted to do, first (engine.gateview.GateView.prediction).
        "prediction": redact(view.prediction.payload()) if view.prediction is not None else None,
        "index": gate.index if gate else None,
        "message": gate.message if gate else "",
        "digest": gate.digest if gate else "",
        "expires_at": gate.expires_at if gate else "",
        "approvals_required": gate.approvals_required if gate else 1,
        "releases": [
            {
                "index": r.index,
                "skill": r.skill,
                "tool": r.tool,
                "params": r.params,
                "tier": r.tier,
                "rollback_tool": r.rollback_tool,
                "rollback_params": r.rollback_params,
                "undo": r.undo,
                "preview": r.preview.summary if r.preview else "",
            }
            for r in view.releases
        ],
        "targets": [redact_text(t.line) for t in view.targets],
        "state_note": view.state_note,
        # What the gate page flags, as objects (engine.gateview.GateView.alert_items).
        "alerts": [a.model_dump(mode="json") for a in view.alert_items()],
    }


# Audit actions that announce an event of their own while the state stays (the gate still waits).
_AUDITED: Final = {
    "approval_recorded": "approval_partial",
    "gate_expired": "gate_expired",
    "approvals_voided": "plan_changed",
}


@dataclass(frozen=True, slots=True)
class EventSources:
    """What an event is built from besides the workflow: the gate view and decision summary (for
    gate events), whether a step only reads (for what a failed run changed), the console's URL."""

    describe: DescribeGate | None = None
    decide: DecideGate | None = None
    is_read: IsRead | None = None
    console_url: str = ""


def _state_event(before: WorkflowState, wf: Workflow) -> tuple[str, int | None] | None:
    after = wf.state
    if after is before:
        return None
    if after is W.AWAITING_APPROVAL:
        step = next((s.index for s in wf.steps if s.is_gate and s.status is StepStatus.PENDING), None)
        # A gate opened again by a check right before a write (engine/execution/holds.py) is
        # announced by the hold's own event (drift_detected, …); it waits for approval the same way.
        held = holds.hold_of(gate_records.gate_record(wf, step)) if step is not None else None
        return ((held.event or "awaiting_approval") if held else "awaiting_approval"), step
    if after is W.COMPLETED:
        return "completed", None
    if after is W.FAILED and before is W.ROLLING_BACK:
        return ("rollback_incomplete" if wf.blocked_reason == "rollback_failed" else "rolled_back"), None
    if after is W.FAILED:
        bad = (StepStatus.FAILED, StepStatus.INTERRUPTED)
        return "failed", next((s.index for s in wf.steps if s.status in bad), None)
    if after is W.CANCELLED:
        return "cancelled", None
    return None


def _envelope(wf: Workflow, name: str, step: int | None, actor: str, sources: EventSources) -> dict[str, Any]:
    """What every event carries: which workflow, where it stands, its link in the console (with a
    console URL: sign-in required, never an approval by itself), who asked for it and why, and
    who caused this event."""
    event: dict[str, Any] = {
        "event": name,
        "workflow_id": wf.id,
        "workflow_type": wf.workflow_type,
        "state": wf.state.value,
    }
    if step is not None:
        event["step"] = step
    if sources.console_url:
        waits = name in _GATE_EVENTS or (wf.state is W.AWAITING_APPROVAL and name != "gate_expired")
        event["link"] = (
            gate_link(sources.console_url, wf.id) if waits else workflow_link(sources.console_url, wf.id)
        )
    description = wf.params.get("description") or wf.params.get("goal") or ""
    event["requested_by"] = wf.created_by
    if wf.requested_via and wf.requested_via != wf.created_by:
        event["requested_via"] = wf.requested_via
    event["description"] = _bounded(description)
    event["actor"] = actor
    return event


_GATE_EVENTS: Final = frozenset({"awaiting_approval", "approval_partial", "plan_changed"})


def _approvals(wf: Workflow) -> dict[str, Any]:
    gate = gate_records.pending_gate(wf)
    record = gate_records.gate_record(wf, gate.index) if gate is not None else None
    if gate is None or record is None:
        return {}
    names = gate_records.approver_names(record)
    required = gate_records.required_approvals(gate, record)
    return {
        "approved_by": names,
        "approvals_required": required,
        "approvals_missing": max(0, required - len(names)),
        "expires_at": iso(record.expires_at),
    }


def _failure(wf: Workflow, step: int | None, is_read: IsRead | None) -> dict[str, Any]:
    """A failed run: the error in full (bounded, secrets masked), what it already changed (steps
    that succeeded and are not reads) and what may have changed (effect unknown)."""
    bad = wf.steps[step] if step is not None else None
    result = bad.result if bad is not None else None
    error = result.get("error") or result.get("reason") if isinstance(result, Mapping) else result
    out: dict[str, Any] = {"error": _bounded(error or "", _ERROR_MAX)}
    if bad is not None:
        out["failed_step"] = {
            "index": bad.index,
            "skill": bad.skill,
            "tool": bad.tool,
            "status": bad.status.value,
        }

    def ref(s: Step) -> dict[str, Any]:
        return {"index": s.index, "skill": s.skill, "tool": s.tool, "params": redact(s.params)}

    done = [s for s in wf.steps if s.status is StepStatus.SUCCESS and not s.is_gate]
    out["changed"] = [ref(s) for s in done if is_read is None or not is_read(s)]
    out["effect_unknown"] = [ref(s) for s in wf.steps if s.status is StepStatus.INTERRUPTED]
    return out


def events_for(
    before: WorkflowState, wf: Workflow, sources: EventSources | None = None
) -> list[dict[str, Any]]:
    """The events one change of ``wf`` announces (its state moved from ``before``; ``wf.new_events``
    are the audit events it adds), in order: events of a gate that still waits (a partial
    approval, an expired gate, a changed plan), then the state change's."""
    sources = sources or EventSources()
    entries = {e.action: e for e in wf.new_events}
    events: list[dict[str, Any]] = []
    gate = gate_records.pending_gate(wf)
    if wf.state is W.AWAITING_APPROVAL and wf.state is before:
        for action, name in _AUDITED.items():
            entry = entries.get(action)
            if entry is None:
                continue
            event = _envelope(wf, name, gate.index if gate else None, entry.actor, sources)
            event.update(_approvals(wf))
            if name == "approval_partial" and entry.names:
                event["approver"] = entry.names[0]
                record = gate_records.gate_record(wf, gate.index) if gate else None
                last = record.approvals[-1] if record and record.approvals else None
                if last is not None and last.comment:
                    event["comment"] = last.comment
            if name == "plan_changed":
                event["detail"] = _bounded(entry.detail)
                event["voided"] = list(entry.names)
            events.append(event)
    changed = _state_event(before, wf)
    if changed is not None:
        name, step = changed
        # Who caused it: the last audit event naming someone (a failure's own save names nobody).
        actor = next((e.actor for e in reversed(wf.audit_log) if e.actor), "")
        event = _envelope(wf, name, step, actor, sources)
        if wf.state is W.AWAITING_APPROVAL:
            held = holds.hold_of(gate_records.gate_record(wf, step)) if step is not None else None
            if held is not None:
                event["hold"] = redact(held.stored())
            event.update(_approvals(wf))
            if sources.decide is not None:
                decision = sources.decide(wf)
                if decision is not None:
                    event["decision"] = redact(decision.payload())
            if sources.describe is not None:
                event["gate"] = gate_summary(sources.describe(wf))
            if sources.console_url:
                event["gate_url"] = gate_link(sources.console_url, wf.id)
        elif name == "failed":
            event.update(_failure(wf, step, sources.is_read))
        elif name == "cancelled":
            event["reason"] = _bounded(wf.blocked_reason)
            rejected = entries.get("rejected")
            if rejected is not None:
                event["rejected"] = True
                event["rejected_by"] = rejected.names[0] if rejected.names else rejected.actor
        elif name in ("rolled_back", "rollback_incomplete"):
            event["undone"] = [
                {"step": r.get("step"), "tool": r.get("tool"), "status": r.get("status")}
                for r in wf.rollback_results
                if isinstance(r, Mapping)
            ]
        events.append(event)
    for event in events:
        event["ts"] = iso(utcnow())
        event["event_id"] = uuid.uuid4().hex
    return events


def gate_link(public_url: str, workflow_id: str) -> str:
    """The gate's page in the web console under the server's public URL."""
    return f"{public_url.rstrip('/')}/console/workflows/{workflow_id}/gate"


def workflow_link(public_url: str, workflow_id: str) -> str:
    """The workflow's page in the web console under the server's public URL."""
    return f"{public_url.rstrip('/')}/console/workflows/{workflow_id}"


def _where(url: str) -> str:
    """The receiver for log lines: scheme, host and port only (a path or query may carry a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"


class Claimed(Protocol):
    @property
    def event_id(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def attempts(self) -> int: ...


class Outbox(Protocol):
    """The store's notification outbox (store/outbox.py: ``Outbox``, ``MemoryStore``'s in memory)."""

    def enqueue_notices(self, notices: Sequence[tuple[str, str, bytes]]) -> None: ...
    def claim_notice(self, lease_seconds: float) -> Claimed | None: ...
    def finish_notice(self, event_id: str, status: str, attempts: int) -> None: ...
    def retry_notice(self, event_id: str, attempts: int, delay: float) -> None: ...
    def notice_counts(self) -> Mapping[str, int]: ...
    def prune_notices(self, older_than: float) -> int: ...


NotifyFormat = Literal["json", "slack", "teams"]


def encode(event: Mapping[str, Any], fmt: NotifyFormat = "json") -> bytes:
    """The body POSTed for ``event``: the event itself (``json``), or a chat message built from it
    (``slack``: Block Kit; ``teams``: an Adaptive Card; adapters/chat.py)."""
    body = dict(event) if fmt == "json" else render(event, fmt)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class Notifier:
    """Writes events to the outbox and POSTs due outbox rows to ``url`` from one daemon thread."""

    def __init__(
        self,
        url: str,
        secret: str = "",
        *,
        outbox: Outbox,
        timeout: float = 5.0,
        attempts: int = 4,
        backoff: float = 0.5,
        poll: float = 1.0,
        retention: float = 7 * 86400.0,
    ) -> None:
        self.url = url
        self._secret = secret
        self._outbox = outbox
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.poll = poll
        # Delivered and dropped rows older than this are deleted, checked at this pace.
        self.retention = retention
        self.prune_every = min(3600.0, max(retention / 10, poll))
        self._pruned_at = -math.inf
        # A claim outlives one attempt; a sender that died mid-attempt lets it expire.
        self.claim_seconds = timeout + 30.0
        self._cond = threading.Condition()
        self._wake = False
        self._draining = False
        self._stopped = False
        # When the earliest retry this sender scheduled falls due (monotonic): it waits until
        # then rather than a whole poll, so the documented backoff holds.
        self._retry_at: float | None = None
        # Set by the app once the engine exists: the gate view, decision summary and risk tiers
        # events are built with, and the console's URL their links lead to.
        self.sources = EventSources()
        self.format: NotifyFormat = "json"
        self._thread = threading.Thread(target=self._work, name="pilot-notify", daemon=True)
        self._thread.start()

    def _encode(self, event: Mapping[str, Any]) -> bytes:
        return encode(event, self.format)

    def __repr__(self) -> str:  # never shows the secret
        return f"Notifier({_where(self.url)!r}, signed={bool(self._secret)})"

    # --- producing --------------------------------------------------------------------------
    def notices(self, before: WorkflowState, wf: Workflow) -> list[tuple[str, str, bytes]]:
        """``WorkflowEvents`` hook: the outbox row this change announces, for the save's
        transaction. Never raises (a notification problem must never reach the workflow)."""
        try:
            events = events_for(before, wf, self.sources)
            return [(str(e["event_id"]), wf.id, self._encode(e)) for e in events]
        except Exception:
            _log.exception("could not build a notification for %s", wf.id)
            return []

    def workflow_changed(self, before: WorkflowState, wf: Workflow) -> None:
        """``WorkflowEvents`` hook after the commit: wake the sender. Never raises."""
        self._kick()

    def send(self, event: Mapping[str, Any]) -> None:
        """Write one event to the outbox on its own (outside a workflow change)."""
        event_id = str(event.get("event_id") or uuid.uuid4().hex)
        body = self._encode({**event, "event_id": event_id})
        self._outbox.enqueue_notices([(event_id, str(event.get("workflow_id", "")), body)])
        self._kick()

    def _kick(self) -> None:
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def close(self, timeout: float = 5.0) -> bool:
        """Deliver (or give up on) pending rows for up to ``timeout`` s, then stop the sender;
        True when none was left pending. Rows left pending stay in the outbox for any Pilot."""
        with self._cond:
            self._draining = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            _log.warning("notifications to %s still pending; left in the outbox", _where(self.url))
            return False
        return True

    # --- delivering -------------------------------------------------------------------------
    def _prune(self) -> None:
        """Delete old delivered/dropped outbox rows, at most every ``prune_every`` seconds."""
        now = time.monotonic()
        if now - self._pruned_at < self.prune_every:
            return
        self._pruned_at = now
        try:
            gone = self._outbox.prune_notices(self.retention)
        except DatabaseUnavailable:  # the store logs an outage once, not each poll
            return
        except Exception:
            _log.exception("could not prune the notification outbox")
            return
        if gone:
            _log.info("pruned %d delivered or dropped notification(s) from the outbox", gone)

    def _work(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
            self._prune()
            try:
                claimed = self._outbox.claim_notice(self.claim_seconds)
                if claimed is None and self._draining and not self._outbox.notice_counts().get("pending"):
                    return
            except Exception as exc:
                if not isinstance(exc, DatabaseUnavailable):  # an outage: the store logs it once
                    _log.exception("could not read the notification outbox")
                claimed = None
                if self._draining:
                    return
            if claimed is None:
                with self._cond:
                    if not self._wake and not self._stopped:
                        self._cond.wait(self._idle_wait())
                    self._wake = False
                continue
            try:
                self._attempt(claimed)
            except DatabaseUnavailable:  # the claim expires and the row is sent again later
                pass
            except Exception:
                _log.exception("could not record a notification attempt")

    def _idle_wait(self) -> float:
        """How long to sleep with nothing due: a poll, or less when a retry falls due sooner."""
        wait = min(self.poll, self.backoff) if self._draining else self.poll
        if self._retry_at is not None:
            due = self._retry_at - time.monotonic()
            if due <= wait:
                self._retry_at = None
                wait = max(due, 0.0)
        return wait

    def _attempt(self, claimed: Claimed) -> None:
        made = claimed.attempts + 1
        if self._deliver(claimed.body, claimed.event_id, made):
            self._outbox.finish_notice(claimed.event_id, "delivered", made)
        elif made >= self.attempts:
            _log.warning(
                "notification %s to %s given up after %d attempts",
                claimed.event_id,
                _where(self.url),
                made,
            )
            self._outbox.finish_notice(claimed.event_id, "dropped", made)
        else:
            delay = self.backoff * 2 ** (made - 1)
            self._outbox.retry_notice(claimed.event_id, made, delay)
            due = time.monotonic() + delay
            with self._cond:
                if self._retry_at is None or due < self._retry_at:
                    self._retry_at = due

    def _deliver(self, body: bytes, event_id: str, attempt: int) -> bool:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "vmware-pilot",
            IDEMPOTENCY_HEADER: event_id,
        }
        if self._secret:
            headers[SIGNATURE_HEADER] = sign(self._secret, body)
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310
        try:
            with _OPENER.open(request, timeout=self.timeout) as reply:
                reply.read()
            return True
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else type(exc).__name__
            _log.info(
                "notification to %s failed (attempt %d/%d): %s",
                _where(self.url),
                attempt,
                self.attempts,
                reason,
            )
            return False
