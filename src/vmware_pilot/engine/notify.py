"""Webhook notifications: a signed JSON POST when a workflow needs a person or reaches an end.

Events: ``awaiting_approval`` (step = the gate), ``completed``, ``failed`` (step = the first step
that failed or whose effect is unknown), ``rolled_back`` / ``rollback_incomplete`` and
``cancelled``. The body is ``{event, workflow_id, workflow_type, state, step?, ts, event_id}``;
``awaiting_approval`` adds ``gate``: what the gate releases (the gate view's released steps with
params masked, risk tier and undo, the targets' state, the plan digest) and, with a public URL
configured, ``gate_url``, the gate's page in the web console.
with a secret, header ``X-Pilot-Signature: sha256=<hex>`` is the HMAC-SHA256 of the raw body.
Delivery happens on a background thread with bounded retries and backoff: a slow, failing or
unreachable receiver never blocks, slows or fails a workflow. The secret is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from vmware_pilot.domain.clock import iso, utcnow
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.safety.redaction import redact_text

__all__ = ["SIGNATURE_HEADER", "Notifier", "event_for", "gate_link", "gate_summary", "sign"]

_log = logging.getLogger(__name__)
W = WorkflowState

SIGNATURE_HEADER: Final = "X-Pilot-Signature"


def sign(secret: str, body: bytes) -> str:
    """The signature header value for ``body``: ``sha256=<hex HMAC-SHA256 with secret>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# The gate view (engine.gates.gate_view) of a workflow waiting at a gate.
DescribeGate = Callable[[Workflow], Mapping[str, Any]]


def gate_summary(view: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a gate view a notification carries (bounded: no previews' raw payloads)."""
    gate = view.get("gate") or {}
    return {
        "index": gate.get("index"),
        "message": gate.get("message", ""),
        "digest": gate.get("digest", ""),
        "expires_at": gate.get("expires_at", ""),
        "approvals_required": gate.get("approvals_required", 1),
        "releases": [
            {
                key: r.get(key)
                for key in (
                    "index",
                    "skill",
                    "tool",
                    "params",
                    "tier",
                    "rollback_tool",
                    "rollback_params",
                    "undo",
                )
            }
            | {"preview": (r.get("preview") or {}).get("summary", "")}
            for r in view.get("releases") or []
        ],
        "targets": [redact_text(str(t.get("line", ""))) for t in view.get("targets") or []],
        "state_note": view.get("state_note", ""),
        # The gate page's alert sentences (engine.gateview.GateView.alerts).
        "alerts": list(view.get("alerts") or []),
    }


def event_for(
    before: WorkflowState, wf: Workflow, describe: DescribeGate | None = None, console_url: str = ""
) -> dict[str, Any] | None:
    """The event a state change from ``before`` to ``wf.state`` announces, or None."""
    step: int | None = None
    after = wf.state
    if after is W.AWAITING_APPROVAL:
        name = "awaiting_approval"
        step = next((s.index for s in wf.steps if s.is_gate and s.status is StepStatus.PENDING), None)
    elif after is W.COMPLETED:
        name = "completed"
    elif after is W.FAILED and before is W.ROLLING_BACK:
        name = "rollback_incomplete" if wf.blocked_reason == "rollback_failed" else "rolled_back"
    elif after is W.FAILED:
        name = "failed"
        bad = (StepStatus.FAILED, StepStatus.INTERRUPTED)
        step = next((s.index for s in wf.steps if s.status in bad), None)
    elif after is W.CANCELLED:
        name = "cancelled"
    else:
        return None
    event: dict[str, Any] = {
        "event": name,
        "workflow_id": wf.id,
        "workflow_type": wf.workflow_type,
        "state": after.value,
    }
    if step is not None:
        event["step"] = step
    if name == "awaiting_approval" and describe is not None:
        event["gate"] = gate_summary(describe(wf))
    if name == "awaiting_approval" and console_url:
        event["gate_url"] = gate_link(console_url, wf.id)
    event["ts"] = iso(utcnow())
    event["event_id"] = uuid.uuid4().hex
    return event


def gate_link(public_url: str, workflow_id: str) -> str:
    """The gate's page in the web console under the server's public URL."""
    return f"{public_url.rstrip('/')}/console/workflows/{workflow_id}/gate"


def _where(url: str) -> str:
    """The receiver for log lines: scheme, host and port only (a path or query may carry a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"


class Notifier:
    """Queues events and POSTs them to ``url`` from one daemon thread, oldest first."""

    def __init__(
        self,
        url: str,
        secret: str = "",
        *,
        timeout: float = 5.0,
        attempts: int = 4,
        backoff: float = 0.5,
        max_pending: int = 1000,
    ) -> None:
        self.url = url
        self._secret = secret
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self._pending: deque[bytes] = deque(maxlen=max_pending)
        self._busy = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Set by the app once the engine exists: the gate view for awaiting_approval events.
        self.describe: DescribeGate | None = None
        self.console_url = ""

    def __repr__(self) -> str:  # never shows the secret
        return f"Notifier({_where(self.url)!r}, signed={bool(self._secret)})"

    # --- producing --------------------------------------------------------------------------
    def workflow_changed(self, before: WorkflowState, wf: Workflow) -> None:
        """``WorkflowEvents`` hook: queue the event this change announces. Never raises."""
        try:
            event = event_for(before, wf, self.describe, self.console_url)
            if event is not None:
                self.send(event)
        except Exception:  # a notification problem must never reach the workflow
            _log.exception("could not queue a notification for %s", wf.id)

    def send(self, event: Mapping[str, Any]) -> None:
        """Queue one event (the oldest is dropped when ``max_pending`` are already waiting)."""
        body = json.dumps(dict(event), ensure_ascii=False, separators=(",", ":")).encode()
        with self._cond:
            if self._closed:
                return
            if len(self._pending) == self._pending.maxlen:
                _log.warning("notification queue full: dropping the oldest event for %s", _where(self.url))
            self._pending.append(body)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="pilot-notify", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop taking events and wait up to ``timeout`` s for queued ones; True when all were handled."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    _log.warning(
                        "%d notification(s) to %s not delivered",
                        len(self._pending) + self._busy,
                        _where(self.url),
                    )
                    return False
                self._cond.wait(left)
        return True

    # --- delivering -------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                body = self._pending.popleft()
                self._busy += 1
            try:
                self._deliver(body)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _deliver(self, body: bytes) -> bool:
        headers = {"Content-Type": "application/json", "User-Agent": "vmware-pilot"}
        if self._secret:
            headers[SIGNATURE_HEADER] = sign(self._secret, body)
        for attempt in range(1, self.attempts + 1):
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as reply:  # noqa: S310
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
            if attempt < self.attempts:
                time.sleep(self.backoff * 2 ** (attempt - 1))
        _log.warning("notification to %s given up after %d attempts", _where(self.url), self.attempts)
        return False
