"""The gate view: everything a person deciding on a pending gate is shown, as one typed model.

Every approval surface (the CLI's ``approve``, the MCP elicitation form, the webhook body and the
web console) renders this model and nothing else, so they cannot disagree. Per released step it
carries the step's plan fields exactly as the plan digest covers them (action, skill, tool, params
and undo params with secrets masked, group), the risk tier, what a later rollback would and would
not undo, the live state of the objects it names and the skill's own preview (both from the last
inspection, ``engine.inspection``), plus a one-line summary of what each earlier step found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import Inspection
from vmware_pilot.results import GateStatus, PredictedStep, Prediction, StepRef
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.safety.predict import NOT_REACHED
from vmware_pilot.safety.redaction import redact, redact_text

__all__ = [
    "Alert",
    "Evidence",
    "GateView",
    "RanStep",
    "ReleasedStep",
    "StepPreview",
    "TargetState",
    "build_view",
    "empty_view",
    "skill_irreversible_steps",
    "summarize_result",
    "undo_note",
]

_SUMMARY_MAX = 200


class TargetState(BaseModel):
    """One object a released step names, as read just before the gate was shown.

    ``summary`` holds the fields its kind shows (engine.targets); a VM's also stand in the
    top-level fields. ``reference_at`` is when the state it is compared with was read."""

    kind: str = "vm"
    name: str
    target: str = ""
    read: Literal["ok", "failed", "not_found", "not_read"] = "not_read"
    summary: dict[str, Any] = Field(default_factory=dict)
    power_state: str = ""
    cpu: int | None = None
    memory_mb: int | None = None
    host: str = ""
    snapshots: list[str] = Field(default_factory=list)
    error: str = ""
    note: str = ""
    # Plain sentences (engine.drift): already as the step would leave it, renamed, gone, changed.
    changes: list[str] = Field(default_factory=list)
    reference_at: str = ""
    line: str = ""


class StepPreview(BaseModel):
    """What the skill said when its tool was called once with ``confirm: false``."""

    status: Literal["previewed", "refused", "failed", "no_preview", "not_run"]
    summary: str
    blockers: list[str] = Field(default_factory=list)
    payload: Any = None


class ReleasedStep(BaseModel):
    index: int
    action: str
    skill: str
    tool: str
    params: dict[str, Any]
    group_id: str = ""
    tier: str
    why: str = ""
    rollback_tool: str = ""
    rollback_params: dict[str, Any] = Field(default_factory=dict)
    undo: str
    targets: list[str] = Field(default_factory=list)
    preview: StepPreview | None = None

    def unclassified(self) -> str:
        """For a tool Pilot cannot classify (tier ``unknown``): why, and how to fix it; "" otherwise."""
        if self.tier != "unknown":
            return ""
        return (
            f"Step {self.index} ({self.skill}.{self.tool}) is unclassified: {self.why or 'Pilot does not know it'}. "
            "Run `vmware-pilot catalog refresh` where the skill is installed, so that its own "
            "annotations classify it (a Pilot with dispatch does this at start when the skills changed)."
        )


class Evidence(BaseModel):
    """A step that ran before the gate: its status and a one-line summary of its result."""

    index: int
    skill: str
    tool: str
    status: str
    summary: str


class RanStep(StepRef):
    """A step before the gate (not a gate) and its status."""

    status: str


Severity = Literal["danger", "warning", "info"]


class Alert(BaseModel):
    """One thing the gate page flags: how serious (``danger``: the run is predicted to fail or be
    refused; ``warning``: something to check; ``info``), what kind (``predicted_failure``,
    ``unclassified``, ``read_failed``, ``target_changed``, ``step_<outcome>``, ``preview_<status>``),
    the object it is about (a step or a target) and the sentence."""

    severity: Severity
    kind: str
    object: str = ""
    text: str


class GateView(BaseModel):
    workflow_id: str
    workflow_type: str
    state: str
    # The pending gate's record (engine.execution.gate_records); no key set in the view of a
    # workflow at no gate.
    gate: GateStatus = Field(default_factory=GateStatus)
    releases: list[ReleasedStep] = Field(default_factory=list)
    already_ran: list[RanStep] = Field(default_factory=list)
    not_executed_before_gate: list[StepRef] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    targets: list[TargetState] = Field(default_factory=list)
    # Where the state and previews come from: when they were read, or why they are not known.
    inspected_at: str = ""
    state_note: str = ""
    # What approving is predicted to do (safety.predict): one verdict and each released step.
    prediction: Prediction | None = None

    def predicted(self, index: int) -> PredictedStep | None:
        """The prediction of released step ``index`` (None without a prediction)."""
        if self.prediction is None:
            return None
        return next((s for s in self.prediction.steps if s.step == index), None)

    def pending(self) -> GateStatus | None:
        """The pending gate's record (``gate``) typed; None in the view of a workflow at no gate."""
        return self.gate if self.gate.model_fields_set else None

    def verdict_line(self) -> str:
        """The prediction in one line (secrets masked): what the approver is told first."""
        if self.prediction is None:
            return ""
        return redact_text(f"Prediction: {self.prediction.summary}")

    def rehearsal_line(self) -> str:
        """The rehearsal on a twin in one line (empty without one): its verdict, the capture and its
        age (stale flagged), each step's answer on the twin, the changes and the digest."""
        r = self.prediction.rehearsal if self.prediction is not None else None
        if r is None:
            return ""
        c = r.capture
        where = (
            f"capture {c.get('id')} of {c.get('vcenter')}, {c.get('age_hours')} h old"
            + (", STALE: older than VMWARE_PILOT_TWIN_MAX_AGE" if c.get("stale") else "")
            if c
            else "no capture"
        )
        steps = "; ".join(
            f"step {s.get('step')} {s.get('outcome')}: {s.get('answer')}"
            for s in r.steps
            if s.get("outcome") != "not_reached"
        )
        text = (
            f"Rehearsal on a twin: {r.verdict.upper()} ({where})"
            + (f": {r.reason}" if r.reason else "")
            + (f" | {steps}" if steps else "")
            + (f" | {len(r.diff)} change(s) on the twin" if r.status == "rehearsed" else "")
            + (f" | digest {r.digest[:19]}…" if r.digest else "")
        )
        return redact_text(text)

    def step_line(self, index: int) -> str:
        """Released step ``index`` as predicted, in one line: outcome, reason (secrets masked)."""
        step = self.predicted(index)
        if step is None:
            return ""
        return redact_text(f"predicted {step.outcome.replace('_', ' ')}: {step.reason}")

    def alert_items(self) -> list[Alert]:
        """What the gate page flags, in page order, as objects: a failing prediction first, then per
        released step: that Pilot cannot classify it (and how to fix that), what changed about its
        targets (engine.drift: gone, renamed, changed since first shown), a failed read, the step's
        prediction when it is not a plain success (nothing to do, refused, fails, unknown: judged
        against the state the plan leaves at that point), and a preview the skill could not give
        (secrets masked). A skill's refusal or failed preview is said through the prediction, which
        knows whether earlier steps change what the preview saw."""
        found: list[Alert] = []

        def add(severity: Severity, kind: str, obj: str, text: str) -> None:
            if text:
                found.append(Alert(severity=severity, kind=kind, object=obj, text=redact_text(text)))

        if self.prediction is not None and self.prediction.predicts_failure:
            failing = self.prediction.failing_step
            add(
                "danger",
                "predicted_failure",
                f"step {failing}" if failing is not None else "",
                self.prediction.summary,
            )
        rehearsal = self.prediction.rehearsal if self.prediction is not None else None
        if rehearsal is not None:
            for d in rehearsal.disagreements:
                add(
                    "warning",
                    "rehearsal_disagrees",
                    "",
                    f"The rehearsal on a twin disagrees with the model: {d}",
                )
            if rehearsal.capture.get("stale"):
                add(
                    "warning",
                    "rehearsal_stale",
                    "",
                    f"The twin's capture is {rehearsal.capture.get('age_hours')} h old (stale).",
                )
            if rehearsal.status != "rehearsed":
                add("info", "not_rehearsed", "", f"Not rehearsed on a twin: {rehearsal.reason}")
        by_name = {t.name: t for t in self.targets}
        seen: set[str] = set()
        for r in self.releases:
            where = f"step {r.index} ({r.skill}.{r.tool})"
            add("warning", "unclassified", where, r.unclassified())
            for name in r.targets:
                t = by_name.get(name)
                if t is None or name in seen:
                    continue
                seen.add(name)
                if t.read == "failed":
                    add("warning", "read_failed", t.name, t.line)
                for change in t.changes:
                    add("warning", "target_changed", t.name, change)
            step = self.predicted(r.index)
            if step is not None and step.reason.startswith(NOT_REACHED):
                continue  # the run stops before it: nothing about it is an alert
            if step is not None and step.outcome != "succeeds":
                severity: Severity = "danger" if step.outcome in ("fails", "refused") else "warning"
                severity = "info" if step.outcome == "no_change" else severity
                add(
                    severity,
                    f"step_{step.outcome}",
                    where,
                    f"Step {r.index} ({r.skill}.{r.tool}) {step.outcome.upper()}: {step.reason}",
                )
            # A step the prediction settles needs no word about its preview; a step it cannot
            # predict keeps the note that the skill could not be asked.
            shown: tuple[str, ...] = ("no_preview",) if step is not None and step.outcome == "unknown" else ()
            shown = ("refused", "failed", "no_preview") if step is None else shown
            if r.preview is not None and r.preview.status in shown:
                status = r.preview.status.replace("_", " ")
                add(
                    "info" if r.preview.status == "no_preview" else "warning",
                    f"preview_{r.preview.status}",
                    where,
                    f"Step {r.index} ({r.skill}.{r.tool}): skill's preview ({status}): {r.preview.summary}",
                )
        return found

    def alerts(self) -> list[str]:
        """The alerts' sentences (``alert_items``), in page order."""
        return [a.text for a in self.alert_items()]

    def payload(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "alerts": self.alerts()}


def skill_irreversible_steps(payload: Any) -> list[int]:
    """The steps a skill's own preview says cannot be undone (aiops' ``irreversible_steps``, at the
    top of its answer, in its ``summary`` or its ``blast_radius``)."""
    if not isinstance(payload, Mapping):
        return []
    for where in (payload, payload.get("summary"), payload.get("blast_radius")):
        found = where.get("irreversible_steps") if isinstance(where, Mapping) else None
        if isinstance(found, list) and found:
            return [int(i) for i in found if isinstance(i, int) and not isinstance(i, bool)]
    return []


def undo_note(
    step: Step, later_gate: int | None = None, skill_irreversible: Sequence[int] = (), *, last: bool = False
) -> str:
    """What a later rollback would do about ``step``, in one true sentence.

    A rollback can only run while the workflow has not completed (a completed workflow is final:
    ``safety.blast.ROLLBACK_BLOCKED_STATES``): after a step fails, or while it waits at
    ``later_gate``, a later gate (None: these are its last steps). ``skill_irreversible``: the
    steps the skill's own preview says its undo cannot reverse (aiops' ``irreversible_steps``).
    ``last``: no step follows it, so no rollback can ever run after it."""
    if not step.rollback_tool:
        return "A rollback would NOT undo this step: the plan names no undo tool for it."
    params = json.dumps(redact(step.rollback_params), ensure_ascii=False, sort_keys=True)
    if last:
        return (
            "No rollback will undo this step: it is the workflow's last, and a completed workflow "
            f"cannot be rolled back. To reverse it later, run {step.skill}.{step.rollback_tool} "
            f"{params} yourself, or plan a new workflow."
        )
    call = f"{step.skill}.{step.rollback_tool} {params} (it restores only what that tool restores)"
    note = (
        f"Until the workflow completes (after a failure, or while it waits at the gate at step "
        f"{later_gate}), a rollback undoes it with {call}."
        if later_gate is not None
        else f"If a later step fails, a rollback undoes it with {call}; once the workflow completes "
        "it cannot be rolled back."
    )
    if skill_irreversible:
        listed = ", ".join(str(i) for i in skill_irreversible)
        note += (
            f" The skill itself reports plan step(s) {listed} as irreversible: its undo skips them, "
            "so they stay as they are."
        )
    return note


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SUMMARY_MAX else text[: _SUMMARY_MAX - 1] + "…"


def _item_name(item: Any) -> str:
    if isinstance(item, Mapping):
        for key in ("name", "vm", "vm_name", "alarm", "entity", "id"):
            if item.get(key):
                return str(item[key])
        return ""
    return str(item) if isinstance(item, str | int | float) else ""


def summarize_result(result: Any) -> str:
    """A bounded one-line summary of a step's result (the full result stays on the step)."""
    if result is None:
        return "no result recorded"
    if isinstance(result, Mapping) and result.get("error"):
        return _short(f"error: {result['error']}")
    if isinstance(result, Mapping):
        lists = [(k, v) for k, v in result.items() if isinstance(v, list)]
        if len(lists) == 1:
            key, items = lists[0]
            names = [n for n in (_item_name(i) for i in items[:3]) if n]
            more = "" if len(items) <= 3 else ", …"
            return _short(f"{len(items)} {key}" + (f": {', '.join(names)}{more}" if names else ""))
        scalars = [f"{k}={v}" for k, v in result.items() if isinstance(v, str | int | float | bool)]
        return _short(", ".join(scalars) or f"{len(result)} fields: {', '.join(map(str, result))}")
    if isinstance(result, list):
        names = [n for n in (_item_name(i) for i in result[:3]) if n]
        return _short(f"{len(result)} items" + (f": {', '.join(names)}" if names else ""))
    return _short(str(result))


def _released(
    step: Step,
    catalog: Catalog,
    inspection: Inspection | None,
    dispatching: bool,
    later_gate: int | None,
    last: bool,
) -> ReleasedStep:
    tier, why = classify_step(step, catalog)
    raw = inspection.previews.get(str(step.index)) if inspection else None
    preview = StepPreview.model_validate(raw) if raw is not None else None
    irreversible = skill_irreversible_steps(preview.payload) if preview is not None else []
    if preview is None and not dispatching:
        preview = StepPreview(
            status="not_run", summary="Pilot runs without dispatch: the skill was not asked."
        )
    named = inspection.named.get(str(step.index), []) if inspection else []
    return ReleasedStep(
        index=step.index,
        action=step.action,
        skill=step.skill,
        tool=step.tool,
        params=redact(step.params),
        group_id=step.group_id,
        tier=tier.value,
        why=why,
        rollback_tool=step.rollback_tool,
        rollback_params=redact(step.rollback_params),
        undo=undo_note(step, later_gate, irreversible, last=last),
        targets=[str(n) for n in named],
        preview=preview,
    )


def build_view(
    wf: Workflow,
    gate: Step,
    gate_info: dict[str, Any],
    releases: list[Step],
    catalog: Catalog,
    inspection: Inspection | None,
    dispatching: bool,
    prediction: Prediction | None = None,
) -> GateView:
    """The view of pending ``gate``: ``gate_info`` is its record view (engine.execution.gate_records), ``inspection``
    the stored result of the last inspection (None: never inspected)."""
    before = wf.steps[: gate.index]
    after = releases[-1].index + 1 if releases else gate.index + 1
    later_gate = next((s.index for s in wf.steps[after:] if s.is_gate), None)
    if not dispatching:
        note = (
            "Current state not known: Pilot runs without dispatch (hand-back mode), so it did not "
            "read the targets or ask the skills for a preview."
        )
    elif inspection is None:
        note = "Current state not read yet."
    else:
        note = f"State read at {iso(inspection.at)}."
    return GateView(
        workflow_id=wf.id,
        workflow_type=wf.workflow_type,
        state=wf.state.value,
        gate=gate_info,
        releases=[
            _released(s, catalog, inspection, dispatching, later_gate, last=s.index == len(wf.steps) - 1)
            for s in releases
        ],
        already_ran=[
            RanStep.model_validate({**s.ref(), "status": s.status.value}) for s in before if not s.is_gate
        ],
        not_executed_before_gate=[
            StepRef.model_validate(s.ref()) for s in before if s.status is StepStatus.NOT_EXECUTED
        ],
        evidence=[
            Evidence(
                index=s.index,
                skill=s.skill,
                tool=s.tool,
                status=s.status.value,
                summary=summarize_result(redact(s.result)),
            )
            for s in before
            if not s.is_gate and s.status in (StepStatus.SUCCESS, StepStatus.FAILED)
        ],
        targets=[TargetState.model_validate(t) for t in inspection.targets] if inspection else [],
        inspected_at=iso(inspection.at) if inspection and dispatching else "",
        state_note=note,
        prediction=prediction,
    )


def empty_view(wf: Workflow) -> GateView:
    return GateView(workflow_id=wf.id, workflow_type=wf.workflow_type, state=wf.state.value)
