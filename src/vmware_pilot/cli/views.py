"""Rich renderings of service results for the operator CLI (tables and panels, secrets masked).

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
from vmware_pilot.safety.redaction import redact

__all__ = [
    "audit_table",
    "blast_panel",
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


def workflows_table(rows: Sequence[Mapping[str, Any]], next_offset: int | None = None) -> RenderableType:
    """The page of workflows; a last line names the command for the next page when there is one."""
    if not rows:
        return Text("No workflows.", style="dim")
    table = _table("id", "type", "state", "updated", keep=("id", "state", "updated"))
    for row in rows:
        table.add_row(
            _t(row["id"]),
            _t(row["type"]),
            _state(str(row["state"])),
            _t(str(row["updated_at"])[:16].replace("T", " ")),
        )
    if next_offset is None:
        return table
    return Group(table, Text(f"More: vmware-pilot workflows --offset {next_offset}", style="dim"))


def templates_table(rows: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = _table("name", "type", "steps", "description")
    for row in rows:
        note = _t(row["error"], "red") if row.get("error") else _t(row.get("description", ""))
        table.add_row(_t(row.get("name", "")), _t(row.get("type", "")), _t(row.get("steps", "")), note)
    return table


def _step_note(step: Mapping[str, Any]) -> str:
    if step.get("action") == "require_approval":
        return str((step.get("params") or {}).get("message", ""))
    result = step.get("result")
    if isinstance(result, Mapping) and result.get("error"):
        return f"error: {result['error']}"
    return ""


def steps_table(steps: Sequence[Mapping[str, Any]]) -> Table:
    table = _table("#", "step", "skill.tool", "status", "note")
    for step in steps:
        gate = step.get("action") == "require_approval"
        table.add_row(
            _t(step.get("index", "")),
            _t("approval gate", "bold yellow") if gate else _t(step.get("action", "")),
            _t(f"{step.get('skill', '')}.{step.get('tool', '')}"),
            _t(step.get("status", "")),
            _t(_step_note(step)),
        )
    return table


def gates_table(gates: Sequence[Mapping[str, Any]]) -> Table:
    table = _table("gate", "status", "approvals", "expires", "plan digest")
    for gate in gates:
        names = ", ".join(str(a.get("approver", "")) for a in gate.get("approvals") or []) or "-"
        expires = _t(str(gate.get("expires_at") or "never")[:19])
        if gate.get("expired"):
            expires = Text.assemble(("EXPIRED", "bold red"), " ", expires)
        table.add_row(
            _t(f"step {gate.get('index')}"),
            _t(gate.get("status", "")),
            _t(f"{len(gate.get('approvals') or [])}/{gate.get('approvals_required', 1)} ({names})"),
            expires,
            _t(gate.get("digest", "")),
        )
    return table


def audit_table(events: Sequence[Mapping[str, Any]]) -> Table:
    table = _table("time", "actor", "action", "detail")
    for event in events:
        table.add_row(
            _t(str(event.get("ts", ""))[:19]),
            _t(event.get("actor", "")),
            _t(event.get("action", "")),
            _t(event.get("detail", "")),
        )
    return table


def status_panel(status: Mapping[str, Any], audit_tail: int) -> RenderableType:
    status = redact(status, scrub_text=False)
    head = Text.assemble(
        _t(status["id"], "bold"),
        _t(f"  {status['workflow_type']}  "),
        _state(str(status["state"])),
    )
    facts = [f"created by {status.get('created_by') or '-'}"]
    if status.get("approved_by"):
        facts.append(f"approved by {status['approved_by']}")
    if status.get("blocked_reason"):
        facts.append(f"reason: {status['blocked_reason']}")
    parts: list[RenderableType] = [head, _t("; ".join(facts), "dim"), steps_table(status["steps"])]
    if status.get("gates"):
        parts += [Text("\nGates", style="bold"), gates_table(status["gates"])]
    summary = (status.get("diff_report") or {}).get("summary")
    if summary:
        parts += [Text("\nChanges", style="bold"), _t(summary)]
    events = list(status.get("audit_log") or [])[-audit_tail:] if audit_tail > 0 else []
    if events:
        parts += [Text(f"\nAudit (last {len(events)})", style="bold"), audit_table(events)]
    return Group(*parts)


def review_panel(review: Mapping[str, Any]) -> RenderableType:
    verdict = str(review.get("verdict", ""))
    style = "green" if verdict == "approved" else "bold red"
    summary = ", ".join(f"{k}={v}" for k, v in (review.get("summary") or {}).items())
    findings = _table("severity", "kind", "step", "message")
    for f in review.get("findings") or []:
        findings.add_row(_t(f["severity"]), _t(f["kind"]), _t(f["step_index"]), _t(f["message"]))
    body: list[RenderableType] = [_t(f"verdict: {verdict}", style), _t(summary, "dim")]
    body.append(findings if review.get("findings") else Text("No findings.", style="green"))
    return Group(*body)


def _json(value: Any) -> str:
    return json.dumps(redact(value, scrub_text=False), ensure_ascii=False, sort_keys=True)


def _release_lines(r: Mapping[str, Any], targets: Mapping[str, Mapping[str, Any]]) -> list[RenderableType]:
    """One released step: skill.tool, risk, params, undo, the state of what it names, the preview."""
    tier = str(r.get("tier", ""))
    head = Text.assemble(
        (f"step {r['index']} ", "bold"),
        _t(f"{r['skill']}.{r['tool']} "),
        (f"[{tier}]", _TIER_STYLE.get(tier, "")),
        _t(f"  group {r['group_id']}" if r.get("group_id") else ""),
    )
    lines: list[RenderableType] = [head, _t(f"   params: {_json(r.get('params') or {})}")]
    lines.append(_t(f"   undo:   {r.get('undo', '')}", "" if r.get("rollback_tool") else "yellow"))
    for name in r.get("targets") or []:
        t = targets.get(str(name))
        if t is None:
            continue
        bad = t.get("read") == "failed" or bool(t.get("changes"))
        lines.append(_t(f"   now:    {t.get('line', '')} → {r['tool']}", "bold red" if bad else "cyan"))
        lines += [_t(f"           {c}", "bold red") for c in t.get("changes") or []]
    preview = r.get("preview") or {}
    if preview:
        style = {"refused": "bold red", "failed": "red", "previewed": "green"}.get(
            str(preview.get("status")), "dim"
        )
        lines.append(_t(f"   preview ({preview.get('status')}): {preview.get('summary', '')}", style))
    return lines


def gate_panel(view: Mapping[str, Any]) -> RenderableType:
    """The pending gate: its message, each released step (params, risk, undo, state now, the
    skill's preview), what the steps before it found, the approvals and the digest."""
    gate: Mapping[str, Any] = view.get("gate") or {}
    targets = {str(t.get("name")): t for t in view.get("targets") or []}
    lines: list[RenderableType] = [
        # One line: a multi-line message cannot imitate the panel's own headings and tables.
        _t(" ".join(str(gate.get("message") or "(no message)").split()), "bold"),
        Text("\nReleases (runs once approved):", style="bold"),
    ]
    for r in view.get("releases") or []:
        lines += _release_lines(r, targets)
    if not view.get("releases"):
        lines.append(Text("nothing: approving ends this part", style="dim"))
    if view.get("state_note"):
        lines.append(Text(str(view["state_note"]), style="dim"))
    evidence = view.get("evidence") or []
    if evidence:
        found = _table("#", "skill.tool", "status", "found")
        for e in evidence:
            found.add_row(_t(e["index"]), _t(f"{e['skill']}.{e['tool']}"), _t(e["status"]), _t(e["summary"]))
        lines += [
            Text(
                "\nEvidence (steps before this gate; full results: vmware-pilot status --json):", style="bold"
            ),
            found,
        ]
    unrun = view.get("not_executed_before_gate") or []
    if unrun:
        ran = _table("#", "skill.tool", "status")
        for s in unrun:
            ran.add_row(_t(s["index"]), _t(f"{s['skill']}.{s['tool']}"), Text("not_executed", style="yellow"))
        lines += [Text("\nHanded out before this gate (Pilot has no result):", style="bold"), ran]
    facts = [f"plan digest {gate.get('digest', '')}"]
    required = int(gate.get("approvals_required") or 1)
    if required > 1:
        names = ", ".join(str(a.get("approver")) for a in gate.get("approvals") or []) or "none yet"
        facts.append(f"approvals {len(gate.get('approvals') or [])}/{required} ({names})")
    if gate.get("expires_at"):
        facts.append(("EXPIRED at " if gate.get("expired") else "expires ") + str(gate["expires_at"])[:19])
    lines += [Text(""), *(_t(fact, "dim") for fact in facts)]
    title = _t(
        f"{view.get('workflow_id')} ({view.get('workflow_type')}): approval gate at step {gate.get('index')}"
    )
    return Panel(Group(*lines), title=title, title_align="left", border_style="yellow")


def handout_table(pending: Sequence[Mapping[str, Any]]) -> Table:
    """Steps handed to the person to perform themselves, in order (secrets masked)."""
    table = _table("#", "skill.tool", "params", "undo")
    for step in pending:
        params = json_text(redact(step.get("params") or {}, scrub_text=False), indent=None)
        table.add_row(
            _t(step.get("index", "")),
            _t(f"{step.get('skill')}.{step.get('tool')}"),
            _t(params),
            _t(step.get("rollback_tool") or "-"),
        )
    return table


def blast_panel(verb: str, radius: Mapping[str, Any]) -> RenderableType:
    """What a rollback or cancel would do and leave (the blast radius)."""
    table = _table("list", "count", "steps")
    for key in (
        "would_roll_back",
        "left_in_place",
        "not_reversed_by_pilot",
        "not_reversible_outside_pilot",
        "left_behind_by_earlier_rollback",
        "performed_outside_pilot",
        "would_skip",
        "handed_out_to_caller",
        "unknown_effects",
    ):
        if key not in radius and f"{key}_count" not in radius:
            continue
        entries = radius.get(key) or []
        names = ", ".join(f"{e.get('index')}:{e.get('skill')}.{e.get('tool')}" for e in entries) or "-"
        table.add_row(_t(key), _t(radius.get(f"{key}_count", len(entries))), _t(names))
    notes = [str(v) for k, v in radius.items() if k.endswith("_note") and v]
    problems = [*radius.get("blockers", []), *radius.get("unmeasured", [])]
    body: list[RenderableType] = [table, *(_t(n, "dim") for n in notes)]
    body += [_t(f"blocked: {p}", "bold red") for p in problems]
    state_after = radius.get("state_after", "")
    title = _t(f"{verb} preview: workflow ends '{state_after}'" if state_after else f"{verb} preview")
    return Panel(Group(*body), title=title, title_align="left", border_style="magenta")


def outcome_panel(result: Mapping[str, Any]) -> RenderableType:
    """A run/approve result: outcome and state, steps handed back, the error, the next gate."""
    outcome = str(result.get("outcome") or result.get("action") or "")
    parts: list[RenderableType] = [
        Text.assemble(("outcome ", "bold"), _state(outcome), "  state ", _state(str(result.get("state", ""))))
    ]
    if result.get("error"):
        parts.append(_t(result["error"], "red"))
    pending = result.get("pending_dispatch") or []
    if pending:
        parts += [
            Text("\nPilot ran none of these: perform them yourself, in order, with the skill's own tool:"),
            handout_table(pending),
        ]
    released = result.get("with_another_caller") or []
    if "released_to" in result and released:
        parts += [Text(""), _t(result.get("message", "")), handout_table(released)]
    gate = result.get("pending_gate") or {}
    if gate and outcome == "awaiting_approval":
        missing = int(gate.get("approvals_missing") or 0)
        quorum = int(gate.get("approvals_required") or 1) > 1
        parts += [
            Text(""),
            _t(
                f"Waiting at the gate at step {gate.get('index')}: {gate.get('message', '')}"
                + (f" ({missing} more approval(s) needed)" if quorum and missing else ""),
                "yellow",
            ),
        ]
    style = "red" if outcome == "failed" else "green" if outcome == "completed" else "cyan"
    return Panel(
        Group(*parts), title=_t(result.get("workflow_id") or result.get("id") or ""), border_style=style
    )
