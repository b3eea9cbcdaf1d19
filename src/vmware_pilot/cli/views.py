"""Rich renderings of service results for the operator CLI (tables and panels, secrets masked).

Each view takes the typed result (``vmware_pilot.results``, ``engine.gateview.GateView``) and reads its
attributes; only free-form data (a step's params and the result a skill answered) is a mapping.

Everything that comes from a workflow (names, messages, params, audit details, errors of other
skills) is rendered through ``_t``: plain text, never Rich markup, with control characters shown
as escapes (``cli.terminal.visible``). A gate message cannot restyle, move or hide what an
operator reads, nor break the rendering.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vmware_pilot.cli.terminal import json_text, visible
from vmware_pilot.engine.decision import decision_lines
from vmware_pilot.engine.gateview import GateView, ReleasedStep, TargetState
from vmware_pilot.results import (
    ActiveWorkflow,
    AuditLine,
    BlastRadius,
    Decision,
    Eligibility,
    GateStatus,
    Handout,
    RecordStep,
    ReviewResult,
    RunResult,
    StatusView,
    StepRef,
    TemplateInfo,
    UndoEntry,
)
from vmware_pilot.safety.redaction import redact

__all__ = [
    "audit_table",
    "blast_panel",
    "decision_panel",
    "gate_panel",
    "gates_table",
    "handout_table",
    "outcome_panel",
    "review_panel",
    "status_panel",
    "steps_table",
    "templates_table",
    "workflows_table",
]

_STATE_STYLE = {
    "completed": "green",
    "failed": "red",
    "cancelled": "dim",
    "awaiting_approval": "bold yellow",
    "running": "cyan",
    "rolling_back": "magenta",
}
_TIER_STYLE = {"destructive": "bold red", "write": "yellow", "read": "green", "unknown": "magenta"}


def _t(value: object, style: str = "") -> Text:
    """``value`` as literal text: square brackets are shown, not read as markup, and control
    characters (escape sequences, carriage returns, line breaks) are shown as escapes."""
    return Text(visible(value), style=style)


def _table(*columns: str, keep: tuple[str, ...] = ("#", "id", "state", "status")) -> Table:
    """A plain table; the ``keep`` columns never wrap (ids, states), the others fold."""
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column in keep)
    return table


def _state(state: str) -> Text:
    return _t(state, _STATE_STYLE.get(state, ""))


def workflows_table(rows: Sequence[ActiveWorkflow], next_offset: int | None = None) -> RenderableType:
    """The page of workflows; a last line names the command for the next page when there is one."""
    if not rows:
        return Text("No workflows.", style="dim")
    table = _table("id", "type", "state", "updated", keep=("id", "state", "updated"))
    for row in rows:
        state = _t(f"{row.state} (gate expired)", "red") if row.expired else _state(row.state)
        table.add_row(_t(row.id), _t(row.type), state, _t(row.updated_at[:16].replace("T", " ")))
    if next_offset is None:
        return table
    return Group(table, Text(f"More: vmware-pilot workflows --offset {next_offset}", style="dim"))


def templates_table(rows: Sequence[TemplateInfo]) -> RenderableType:
    table = _table("name", "type", "steps", "description")
    for row in rows:
        note = _t(row.error, "red") if row.error else _t(row.description)
        steps = row.steps if row.has("steps") else ""
        table.add_row(_t(row.name), _t(row.type), _t(steps), note)
    return table


def _step_note(step: RecordStep) -> str:
    if step.is_gate:
        return str(step.params.get("message", ""))
    result = step.result  # what the skill answered: free-form
    if isinstance(result, Mapping) and result.get("error"):
        return f"error: {result['error']}"
    return ""


def steps_table(steps: Sequence[RecordStep]) -> Table:
    table = _table("#", "step", "skill.tool", "status", "note")
    for step in steps:
        gate = step.is_gate
        table.add_row(
            _t(step.index),
            _t("approval gate", "bold yellow") if gate else _t(step.action),
            _t(f"{step.skill}.{step.tool}"),
            _t(step.status),
            _t(_step_note(step)),
        )
    return table


def gates_table(gates: Sequence[GateStatus]) -> Table:
    table = _table("gate", "status", "approvals", "expires", "plan digest")
    for gate in gates:
        names = ", ".join(a.approver for a in gate.approvals) or "-"
        expires = _t((gate.expires_at or "never")[:19])
        if gate.expired:
            expires = Text.assemble(("EXPIRED", "bold red"), " ", expires)
        table.add_row(
            _t(f"step {gate.index}"),
            _t(gate.status),
            _t(f"{len(gate.approvals)}/{gate.approvals_required} ({names})"),
            expires,
            _t(gate.digest),
        )
    return table


def audit_table(events: Sequence[AuditLine]) -> Table:
    table = _table("time", "actor", "action", "detail")
    for event in events:
        table.add_row(_t(event.ts[:19]), _t(event.actor), _t(event.action), _t(event.detail))
    return table


def status_panel(status: StatusView, audit_tail: int) -> RenderableType:
    status = StatusView.model_validate(redact(status.payload(), scrub_text=False))
    head = Text.assemble(_t(status.id, "bold"), _t(f"  {status.workflow_type}  "), _state(status.state))
    facts = [f"created by {status.created_by or '-'}"]
    if status.approved_by:
        facts.append(f"approved by {status.approved_by}")
    if status.blocked_reason:
        facts.append(f"reason: {status.blocked_reason}")
    parts: list[RenderableType] = [head, _t("; ".join(facts), "dim"), steps_table(status.steps)]
    if status.gates:
        parts += [Text("\nGates", style="bold"), gates_table(status.gates)]
    summary = status.diff_report.get("summary")  # the diff report is free-form (engine.diff)
    if summary:
        parts += [Text("\nChanges", style="bold"), _t(summary)]
    events = status.audit_log[-audit_tail:] if audit_tail > 0 else []
    if events:
        parts += [Text(f"\nAudit (last {len(events)})", style="bold"), audit_table(events)]
    return Group(*parts)


def review_panel(review: ReviewResult) -> RenderableType:
    style = "bold red" if review.needs_revision else "green"
    summary = ", ".join(f"{k}={v}" for k, v in review.summary.payload().items())
    findings = _table("severity", "kind", "step", "message")
    for f in review.findings:
        findings.add_row(_t(f.severity), _t(f.kind), _t(f.step_index), _t(f.message))
    body: list[RenderableType] = [_t(f"verdict: {review.verdict}", style), _t(summary, "dim")]
    body.append(findings if review.findings else Text("No findings.", style="green"))
    return Group(*body)


def _json(value: Any) -> str:
    return json.dumps(redact(value, scrub_text=False), ensure_ascii=False, sort_keys=True)


_OUTCOME_STYLE = {
    "succeeds": "green",
    "no_change": "yellow",
    "refused": "bold red",
    "fails": "bold red",
    "unknown": "yellow",
}
_VERDICT_STYLE = {"succeeds": "bold green", "fails": "bold white on red", "unknown": "bold yellow"}


def _release_lines(
    r: ReleasedStep, targets: Mapping[str, TargetState], view: GateView
) -> list[RenderableType]:
    """One released step: skill.tool, risk, params, undo, the state of what it names, the preview,
    and what the prediction says of it."""
    head = Text.assemble(
        (f"step {r.index} ", "bold"),
        _t(f"{r.skill}.{r.tool} "),
        (f"[{r.tier}]", _TIER_STYLE.get(r.tier, "")),
        _t(f"  group {r.group_id}" if r.group_id else ""),
    )
    lines: list[RenderableType] = [head, _t(f"   params: {_json(r.params)}")]
    if r.unclassified():
        lines.append(_t(f"   {r.unclassified()}", "yellow"))
    lines.append(_t(f"   undo:   {r.undo}", "" if r.rollback_tool else "yellow"))
    for name in r.targets:
        t = targets.get(str(name))
        if t is None:
            continue
        bad = t.read == "failed" or bool(t.changes)
        lines.append(_t(f"   now:    {t.line} → {r.tool}", "bold red" if bad else "cyan"))
        lines += [_t(f"           {c}", "bold red") for c in t.changes]
    preview = r.preview
    if preview is not None:
        style = {"refused": "bold red", "failed": "red", "previewed": "green"}.get(preview.status, "dim")
        lines.append(_t(f"   preview ({preview.status}): {preview.summary}", style))
    predicted = view.predicted(r.index)
    if predicted is not None:
        lines.append(_t(f"   {view.step_line(r.index)}", _OUTCOME_STYLE.get(predicted.outcome, "")))
    return lines


def gate_panel(view: GateView, full: bool = False) -> RenderableType:
    """The pending gate: its message and what it releases. Compact by default (per released step
    one line and its undo, then the alerts); ``full``: each released step's params, risk, undo,
    state now and the skill's preview, what the steps before it found, the approvals and the
    digest. The decision summary (``decision_panel``) is shown after it, right above the prompt."""
    if not full:
        return _compact_gate(view)
    gate = view.pending() or GateStatus(index=-1, status="")
    targets = {t.name: t for t in view.targets}
    lines: list[RenderableType] = [
        # One line: a multi-line message cannot imitate the panel's own headings and tables.
        _t(" ".join((gate.message or "(no message)").split()), "bold"),
    ]
    if view.prediction is not None:
        # What approving is predicted to do comes first.
        lines.append(_t(view.verdict_line(), _VERDICT_STYLE.get(view.prediction.verdict, "bold")))
        if view.prediction.rehearsal is not None:
            rehearsed = view.prediction.rehearsal
            stale = bool(rehearsed.capture.get("stale")) or rehearsed.status != "rehearsed"
            lines.append(_t(view.rehearsal_line(), "yellow" if stale else "dim"))
    lines.append(Text("\nReleases (runs once approved):", style="bold"))
    for r in view.releases:
        lines += _release_lines(r, targets, view)
    if not view.releases:
        lines.append(Text("nothing: approving ends this part", style="dim"))
    if view.state_note:
        lines.append(Text(view.state_note, style="dim"))
    if view.evidence:
        found = _table("#", "skill.tool", "status", "found")
        for e in view.evidence:
            found.add_row(_t(e.index), _t(f"{e.skill}.{e.tool}"), _t(e.status), _t(e.summary))
        lines += [
            Text(
                "\nEvidence (steps before this gate; full results: vmware-pilot status --json):", style="bold"
            ),
            found,
        ]
    if view.not_executed_before_gate:
        ran = _table("#", "skill.tool", "status")
        for s in view.not_executed_before_gate:
            ran.add_row(_t(s.index), _t(f"{s.skill}.{s.tool}"), Text("not_executed", style="yellow"))
        lines += [Text("\nHanded out before this gate (Pilot has no result):", style="bold"), ran]
    facts = [f"plan digest {gate.digest}"]
    if gate.approvals_required > 1:
        names = ", ".join(a.approver for a in gate.approvals) or "none yet"
        facts.append(f"approvals {len(gate.approvals)}/{gate.approvals_required} ({names})")
    if gate.expires_at:
        facts.append(("EXPIRED at " if gate.expired else "expires ") + gate.expires_at[:19])
    if gate.policy is not None:
        facts.append(gate.policy.summary())
    lines += [Text(""), *(_t(fact, "dim") for fact in facts)]
    index = gate.index if view.pending() else None
    title = _t(f"{view.workflow_id} ({view.workflow_type}): approval gate at step {index}")
    return Panel(Group(*lines), title=title, title_align="left", border_style="yellow")


def _compact_gate(view: GateView) -> RenderableType:
    gate = view.pending() or GateStatus(index=-1, status="")
    lines: list[RenderableType] = [_t(" ".join((gate.message or "(no message)").split()), "bold")]
    if view.prediction is not None and view.prediction.rehearsal is not None:
        rehearsed = view.prediction.rehearsal
        stale = bool(rehearsed.capture.get("stale")) or rehearsed.status != "rehearsed"
        lines.append(_t(view.rehearsal_line(), "yellow" if stale else "dim"))
    lines.append(Text("Releases (runs once approved):", style="bold"))
    for r in view.releases:
        predicted = view.predicted(r.index)
        said = f"  → predicted {predicted.outcome.replace('_', ' ')}" if predicted is not None else ""
        named = f"  on {', '.join(r.targets)}" if r.targets else ""
        lines.append(
            Text.assemble(
                (f" step {r.index} ", "bold"),
                _t(f"{r.skill}.{r.tool} "),
                (f"[{r.tier}]", _TIER_STYLE.get(r.tier, "")),
                _t(named),
                _t(said, _OUTCOME_STYLE.get(predicted.outcome, "") if predicted is not None else ""),
            )
        )
        lines.append(_t(f"   {r.undo}", "dim" if r.rollback_tool else "yellow"))
    if not view.releases:
        lines.append(Text(" nothing: approving ends this part", style="dim"))
    # The decision's verdict says what cannot be predicted: here only what needs a look.
    alerts = [a for a in view.alert_items() if a.severity != "info" and a.kind != "step_unknown"]
    for alert in alerts[:_COMPACT_ALERTS]:
        lines.append(_t(f"! {alert.text}", _ALERT_STYLE.get(alert.severity, "")))
    if len(alerts) > _COMPACT_ALERTS:
        lines.append(_t(f"… and {len(alerts) - _COMPACT_ALERTS} more alert(s)", "yellow"))
    if gate.policy is not None:
        lines.append(_t(gate.policy.summary(), "dim"))
    lines.append(
        _t(
            f"Everything (params, state now, previews, evidence): vmware-pilot approve {view.workflow_id} --full",
            "dim",
        )
    )
    index = gate.index if view.pending() else None
    title = _t(f"{view.workflow_id} ({view.workflow_type}): approval gate at step {index}")
    return Panel(Group(*lines), title=title, title_align="left", border_style="yellow")


_COMPACT_ALERTS = 3
_ALERT_STYLE = {"danger": "bold red", "warning": "yellow", "info": "dim"}


def decision_panel(decision: Decision, allowed: Eligibility | None = None) -> RenderableType:
    """The decision summary (engine.decision) and what the person may do: the last lines above
    the prompt."""
    styles = {"Verdict": _VERDICT_STYLE.get(decision.verdict, "bold")}
    lines: list[RenderableType] = []
    for line in decision_lines(decision, short=True):
        head = line.split(":", 1)[0]
        style = styles.get(head, "")
        if line.startswith(("Expired", "The plan changed")):
            style = "bold red"
        lines.append(_t(line, style))
    if allowed is not None:
        lines.append(
            _t("You may approve or reject.", "green")
            if allowed.may_approve
            else _t(f"You cannot approve: {allowed.approve_why}", "bold red")
        )
    return Panel(Group(*lines), title=_t("Decision"), title_align="left", border_style="cyan")


def handout_table(pending: Sequence[StepRef]) -> Table:
    """Steps handed to the person to perform themselves, in order (secrets masked)."""
    table = _table("#", "skill.tool", "params", "undo")
    for step in pending:
        handout = step if isinstance(step, Handout) else None
        params = json_text(redact(handout.params if handout else {}, scrub_text=False), indent=None)
        table.add_row(
            _t(step.index),
            _t(f"{step.skill}.{step.tool}"),
            _t(params),
            _t((handout.rollback_tool if handout else "") or "-"),
        )
    return table


# The lists of a blast radius, in the order they are shown.
_BLAST_LISTS = (
    "would_roll_back",
    "left_in_place",
    "not_reversed_by_pilot",
    "not_reversible_outside_pilot",
    "left_behind_by_earlier_rollback",
    "performed_outside_pilot",
    "would_skip",
    "handed_out_to_caller",
    "unknown_effects",
)
_BLAST_LABELS = {
    "would_roll_back": "would be undone, newest first",
    "left_in_place": "stays applied (no undo tool)",
    "not_reversed_by_pilot": "not reversed by Pilot",
    "not_reversible_outside_pilot": "done outside Pilot, cannot be undone",
    "left_behind_by_earlier_rollback": "left behind by an earlier rollback",
    "performed_outside_pilot": "performed outside Pilot",
    "would_skip": "would not run (skipped)",
    "handed_out_to_caller": "handed to the agent (may already be done)",
    "unknown_effects": "effect unknown",
}
_BLAST_NOTES = ("left_in_place_note", "not_reversible_outside_pilot_note", "handed_out_to_caller_note")


def _undo_call(entry: StepRef) -> str:
    """A step in a blast-radius list, in words: the step, and for an undo the call that undoes it."""
    text = f"step {entry.index} {entry.skill}.{entry.tool}"
    if isinstance(entry, UndoEntry) and entry.rollback_tool:
        text += f" ← undone by {entry.skill}.{entry.rollback_tool} {_json(entry.rollback_params)}"
        if entry.leaves_behind:
            text += f" ({entry.leaves_behind})"
    return text


def blast_panel(verb: str, radius: BlastRadius) -> RenderableType:
    """What a rollback or cancel would do and leave (the blast radius), in words: what would be
    undone and with which call, what stays applied, what cannot be undone."""
    table = _table("what", "count", "steps", keep=())
    for key in _BLAST_LISTS:
        if not radius.has(key) and not radius.has(f"{key}_count"):
            continue  # a list the other verb's preview has
        entries: list[StepRef] = getattr(radius, key)
        count = getattr(radius, f"{key}_count") if radius.has(f"{key}_count") else len(entries)
        if not count:
            continue  # nothing to say
        names = "\n".join(_undo_call(e) for e in entries)
        if count > len(entries):
            names += f"\n… and {count - len(entries)} more"
        table.add_row(_t(_BLAST_LABELS[key]), _t(count), _t(names))
    notes = [str(getattr(radius, k)) for k in radius.payload() if k in _BLAST_NOTES and getattr(radius, k)]
    problems = [*radius.blockers, *radius.unmeasured]
    doing = "roll back" if verb == "rollback" else verb
    nothing = Text(f"Nothing to {doing}: no step changed anything Pilot knows of.", style="dim")
    body: list[RenderableType] = [table if table.row_count else nothing, *(_t(n, "dim") for n in notes)]
    body += [_t(f"blocked: {p}", "bold red") for p in problems]
    state_after = radius.state_after
    title = _t(f"{verb} preview: the workflow would end {state_after}" if state_after else f"{verb} preview")
    return Panel(Group(*body), title=title, title_align="left", border_style="magenta")


def outcome_panel(result: RunResult, outcome: str = "") -> RenderableType:
    """A run/approve result: outcome and state, steps handed back, the error, the next gate.
    ``outcome`` stands in for a result that has none (a rollback's ``action``)."""
    outcome = outcome or (result.outcome or "")
    parts: list[RenderableType] = [
        Text.assemble(("outcome ", "bold"), _state(outcome), "  state ", _state(result.state))
    ]
    if result.error:
        parts.append(_t(result.error, "red"))
    if result.pending_dispatch:
        parts += [
            Text("\nPilot ran none of these: perform them yourself, in order, with the skill's own tool:"),
            handout_table(result.pending_dispatch),
        ]
    if result.has("released_to") and result.with_another_caller:
        parts += [Text(""), _t(result.message), handout_table(result.with_another_caller)]
    gate = result.pending_gate
    if gate is not None and result.is_at_gate:
        missing = gate.approvals_missing
        quorum = gate.approvals_required > 1
        parts += [
            Text(""),
            _t(
                f"Waiting at the gate at step {gate.index}: {gate.message}"
                + (f" ({missing} more approval(s) needed)" if quorum and missing else ""),
                "yellow",
            ),
        ]
    style = "red" if result.is_failed else "green" if result.is_completed else "cyan"
    return Panel(Group(*parts), title=_t(result.id), border_style=style)
