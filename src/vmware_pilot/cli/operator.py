"""Operator commands: the people who answer for production, on the same engine, rules and store.

`workflows`, `status`, `review`, `templates` read; `approve`, `reject`, `cancel`, `rollback`
show what they would do and ask before acting. The person is the OS account; `approve` is the door
the `human` approvals policy leaves open, and it binds the approval to the plan digest shown.
Token roles and four-eyes do not apply here: a stdio agent runs as the same account as the person
who approves its plans, and a shell as Pilot's account can change its store anyway (README).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from vmware_pilot.cli import views
from vmware_pilot.cli.common import (
    JsonOption,
    Output,
    YesOption,
    confirm,
    fail,
    open_app,
    operator,
    refuse,
    run_async,
)
from vmware_pilot.cli.terminal import visible
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.paging import DEFAULT_PAGE, MAX_PAGE
from vmware_pilot.engine.approval import release_notice
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.errors import PilotError

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = [
    "approve",
    "cancel",
    "printer",
    "reject",
    "review",
    "rollback",
    "status",
    "templates",
    "workflows",
]

WorkflowArg = Annotated[str, typer.Argument(help="Workflow id (wf-…), as `vmware-pilot workflows` lists.")]
DispatchOption = Annotated[
    bool,
    typer.Option(
        "--dispatch",
        help="Let Pilot run the steps (or undos) in each skill's own MCP server, as a server started "
        "with --dispatch does (also VMWARE_PILOT_DISPATCH=stdio).",
    ),
]
# Step statuses only a dispatching Pilot produces (hand-back steps are not_executed / reported_done).
_RAN_BY_PILOT = ("success", "failed", "interrupted", "rolled_back", "partially_rolled_back")
_DISPATCH_HINT = (
    "Add --dispatch (or set VMWARE_PILOT_DISPATCH=stdio) so Pilot calls the skills, as the server does."
)
AckUnknown = Annotated[
    bool,
    typer.Option(
        "--ack-unknown-effects",
        help="Accept steps whose effect is unknown (running/interrupted) after checking the target system.",
    ),
]


def printer(out: Output) -> ProgressFn:
    """Progress lines for a run: ``[done/total] message``."""

    async def progress(done: float, total: float | None, message: str) -> None:
        count = f"{int(done)}/{int(total)}" if total else f"{int(done)}"
        out.show(Text.assemble((f"[{count}]", "dim"), " ", visible(message)))

    return progress


def _read(json_output: bool, fetch: Callable[[PilotApp], Any], render: Callable[[Any], Any]) -> None:
    """A read command: fetch from the app, print JSON (``--json``) or the readable view."""
    out = Output(json_output)
    with open_app() as app:
        try:
            result = fetch(app)
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result)
    if not json_output:
        out.show(render(result))


def workflows(
    state: Annotated[
        list[WorkflowState] | None, typer.Option("--state", "-s", help="Only this state (repeatable).")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_PAGE, help=f"Page size, newest first (at most {MAX_PAGE}).")
    ] = DEFAULT_PAGE,
    offset: Annotated[int, typer.Option(min=0, help="Workflows to skip before the page.")] = 0,
    json_output: JsonOption = False,
) -> None:
    """List workflows, newest first, one page at a time (--offset pages on)."""

    def fetch(app: PilotApp) -> dict[str, Any]:
        # One row more than the page tells whether another page follows, without counting the table.
        rows = app.store.list_all(limit + 1, offset, state or None)
        page = rows[:limit]
        more = len(rows) > limit
        return {"workflows": page, "count": len(page), "next_offset": offset + limit if more else None}

    _read(json_output, fetch, lambda r: views.workflows_table(r["workflows"], r["next_offset"]))


def status(
    workflow_id: WorkflowArg,
    audit: Annotated[int, typer.Option(min=0, help="Audit events shown (latest).")] = 10,
    json_output: JsonOption = False,
) -> None:
    """Show a workflow: its steps with status and gate messages, gates, changes and audit tail."""
    _read(
        json_output,
        lambda app: app.service.get_workflow_status(workflow_id),
        lambda r: views.status_panel(r, audit),
    )


def review(workflow_id: WorkflowArg, json_output: JsonOption = False) -> None:
    """Review a workflow's plan: findings, summary and verdict."""
    _read(json_output, lambda app: app.service.review_workflow(workflow_id), views.review_panel)


def templates(json_output: JsonOption = False) -> None:
    """List the built-in and custom templates `vmware-pilot run` can start."""
    _read(
        json_output,
        lambda app: {"templates": app.service.list_workflows(limit=1)["templates"]},
        lambda r: views.templates_table(r["templates"]),
    )


def _pending_gate(
    app: Any, workflow_id: str, out: Output, json_output: bool, person: Actor | None = None
) -> dict[str, Any]:
    """The gate view; for ``person`` (who is about to decide) with the targets read again."""
    try:
        if person is not None and app.dispatcher is not None:
            view: dict[str, Any] = run_async(app, app.service.show_gate(person, workflow_id))
        else:
            view = app.service.pending_gate(workflow_id)
    except PilotError as exc:
        fail(exc, json_output)
    out.show(views.gate_panel(view))
    return view


def approve(
    workflow_id: WorkflowArg,
    ack_not_executed: Annotated[
        bool,
        typer.Option(
            "--ack-not-executed",
            help="State that you performed the steps handed out before this gate and checked their results.",
        ),
    ] = False,
    dispatch: DispatchOption = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Approve the gate a workflow waits at, as yourself, after seeing what it releases."""
    out = Output(json_output)
    person = operator()
    with open_app(dispatch) as app:
        view = _pending_gate(app, workflow_id, out, json_output, person)
        gate = view["gate"]
        if gate.get("expired"):
            refuse(
                f"the gate expired at {gate['expires_at']}; it can no longer be approved",
                f"Reject it with `vmware-pilot reject {workflow_id} --reason ...` (or cancel it) and plan again.",
            )
        if gate.get("plan_changed"):
            refuse(
                "the steps this gate releases changed after the gate was reached; nobody approved this plan",
                f"Reject it with `vmware-pilot reject {workflow_id} --reason ...` and create a new workflow.",
            )
        unrun = view.get("not_executed_before_gate") or []
        if unrun and not ack_not_executed:
            labels = ", ".join(f"step {s['index']} ({s['skill']}.{s['tool']})" for s in unrun)
            refuse(
                f"{labels} before this gate were handed out and Pilot has no record that they ran",
                "Add --ack-not-executed only if they were performed and you checked their results; "
                f"otherwise `vmware-pilot reject {workflow_id} --reason ...`.",
            )
        ran_by_pilot = [s for s in view.get("already_ran") or [] if s["status"] in _RAN_BY_PILOT]
        if view.get("releases") and app.dispatcher is None and ran_by_pilot:
            refuse(
                "Pilot ran this workflow's earlier steps itself; approving here without dispatch would "
                "hand the steps this gate releases to the agent instead of running them",
                _DISPATCH_HINT,
            )
        if view.get("releases"):
            out.show(
                "Once approved, Pilot runs the released steps here."
                if app.dispatcher is not None
                else release_notice(app.store.load(workflow_id), dispatching=False)
            )
        confirm(
            f"Approve this gate as {person.label}?",
            yes,
            json_output,
            "Run it in a terminal and answer the question. --yes is for the person approving, who "
            "already decided; an agent must not use it to approve on a person's behalf.",
        )
        try:
            result = run_async(
                app,
                app.service.approve(
                    person,
                    workflow_id,
                    person.label,
                    ack_not_executed,
                    progress=printer(out),
                    channel="cli",
                    expected_digest=str(gate["digest"]),
                ),
            )
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result)
    if not json_output:
        out.show(views.outcome_panel(result))
    if result.get("outcome") == "failed" or result.get("error"):
        raise typer.Exit(1)


def reject(
    workflow_id: WorkflowArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why: written to the audit trail.")],
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Reject the gate a workflow waits at: the workflow is cancelled, the rejection audited."""
    out = Output(json_output)
    person = operator()
    if not reason.strip():
        refuse("a rejection needs a reason", "Pass --reason 'what is wrong'.", code=2)
    with open_app() as app:
        _pending_gate(app, workflow_id, out, json_output)
        confirm(f"Reject this gate and cancel {workflow_id}?", yes, json_output)
        try:
            result = app.service.reject(person, workflow_id, reason, rejected_by=person.label)
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result)
    if not json_output:
        out.show(
            Text.assemble(
                (visible(workflow_id), "bold"),
                visible(f" rejected by {person.label} and cancelled: {reason}"),
            )
        )


def cancel(
    workflow_id: WorkflowArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why: written to the audit trail.")] = "",
    ack_unknown_effects: AckUnknown = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Cancel a workflow: shows what stays applied and what is skipped, asks, then cancels."""
    out = Output(json_output)
    person = operator()
    with open_app() as app:
        service = app.service
        try:
            preview = run_async(
                app, service.cancel_workflow(person, workflow_id, reason, False, ack_unknown_effects)
            )
            out.show(views.blast_panel("cancel", preview["blast_radius"]))
            radius = preview["blast_radius"]
            if radius.get("blockers") or radius.get("unmeasured"):
                refuse(
                    "cancel is blocked: " + "; ".join([*radius["blockers"], *radius["unmeasured"]]),
                    f"`vmware-pilot status {workflow_id}` shows every step; check the target system first.",
                )
            confirm(f"Cancel {workflow_id}?", yes, json_output)
            result = run_async(
                app, service.cancel_workflow(person, workflow_id, reason, True, ack_unknown_effects)
            )
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result)
    if not json_output:
        out.show(
            Text.assemble(
                (visible(workflow_id), "bold"), visible(" cancelled" + (f": {reason}" if reason else ""))
            )
        )


def rollback(
    workflow_id: WorkflowArg,
    ack_unknown_effects: AckUnknown = False,
    dispatch: DispatchOption = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Roll back what Pilot ran, last first: shows the blast radius, asks, then acts."""
    out = Output(json_output)
    person = operator()
    with open_app(dispatch) as app:
        service = app.service
        try:
            preview = run_async(app, service.rollback(person, workflow_id, False, ack_unknown_effects))
            radius = preview["blast_radius"]
            out.show(views.blast_panel("rollback", radius))
            if radius.get("blockers") or radius.get("unmeasured"):
                refuse(
                    "rollback is blocked: " + "; ".join([*radius["blockers"], *radius["unmeasured"]]),
                    f"`vmware-pilot status {workflow_id}` shows every step; check the target system first.",
                )
            if radius.get("would_roll_back_count") and app.dispatcher is None:
                refuse(
                    "Pilot undoes steps by calling their skills' undo tools, and without dispatch every "
                    "undo would fail; nothing was changed",
                    _DISPATCH_HINT,
                )
            confirm(f"Roll back {workflow_id}?", yes, json_output)
            result = run_async(app, service.rollback(person, workflow_id, True, ack_unknown_effects))
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result)
    if not json_output:
        out.show(views.outcome_panel({**result, "outcome": result.get("outcome") or result.get("action")}))
        for entry in result.get("rollback_results") or []:
            out.show(
                Text(visible(f"  step {entry.get('step')}: {entry.get('tool')} → {entry.get('status')}"))
            )
    if result.get("outcome") == "failed":
        raise typer.Exit(1)
