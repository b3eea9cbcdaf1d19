"""Operator commands: the people who answer for production, on the same engine, rules and store.

`workflows`, `status`, `review`, `templates` read; `approve`, `reject`, `cancel`, `rollback`
show what they would do and ask before acting. The person is the OS account; `approve` is the door
the `human` approvals policy leaves open, and it binds the approval to the plan digest shown.
Token roles and four-eyes do not apply here: a stdio agent runs as the same account as the person
who approves its plans, and a shell as Pilot's account can change its store anyway (README).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

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
from vmware_pilot.engine.gates import GatePage
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.engine.requests import ApproveRequest, CancelRequest, RejectRequest, RollbackRequest
from vmware_pilot.errors import PilotError, StepsNotExecuted
from vmware_pilot.results import (
    ActiveWorkflow,
    Eligibility,
    Preview,
    Result,
    StepStatus,
    TemplateInfo,
)

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
_RAN_BY_PILOT = (
    StepStatus.SUCCESS,
    StepStatus.FAILED,
    StepStatus.INTERRUPTED,
    StepStatus.ROLLED_BACK,
    StepStatus.PARTIALLY_ROLLED_BACK,
)
_DISPATCH_HINT = (
    "Add --dispatch (or set VMWARE_PILOT_DISPATCH=stdio) so Pilot calls the skills, as the server does."
)
R = TypeVar("R", bound=Result)


class WorkflowPage(Result):
    """``vmware-pilot workflows``: one page of every workflow, newest first."""

    workflows: list[ActiveWorkflow]
    count: int
    next_offset: int | None = None


class TemplateList(Result):
    """``vmware-pilot templates``."""

    templates: list[TemplateInfo]


def _previewed(answer: Result) -> Preview:
    """A rollback's or cancel's answer without confirm: always its preview."""
    assert isinstance(answer, Preview), answer
    return answer


def _done(answer: R | Preview) -> R:
    """A rollback's or cancel's answer with confirm: never a preview."""
    assert not isinstance(answer, Preview), answer
    return answer


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


def _read(json_output: bool, fetch: Callable[[PilotApp], R], render: Callable[[R], Any]) -> None:
    """A read command: fetch from the app, print JSON (``--json``) or the readable view."""
    out = Output(json_output)
    with open_app() as app:
        try:
            result = fetch(app)
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result.payload())
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

    def fetch(app: PilotApp) -> WorkflowPage:
        # One row more than the page tells whether another page follows, without counting the table.
        rows = app.service.records.list_all(limit + 1, offset, state or None)
        page = app.service.flag_expired(rows[:limit])
        more = len(rows) > limit
        return WorkflowPage(workflows=page, count=len(page), next_offset=offset + limit if more else None)

    _read(json_output, fetch, lambda r: views.workflows_table(r.workflows, r.next_offset))


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
    _read(
        json_output,
        lambda app: app.service.review_workflow(workflow_id),
        views.review_panel,
    )


def templates(json_output: JsonOption = False) -> None:
    """List the built-in and custom templates `vmware-pilot run` can start."""
    _read(
        json_output,
        lambda app: TemplateList(templates=app.service.list_workflows(limit=1).templates),
        lambda r: views.templates_table(r.templates),
    )


def _gate(
    app: Any, workflow_id: str, person: Actor, out: Output, json_output: bool, full: bool, read_again: bool
) -> GatePage:
    """Show the gate view (compact, or ``full``; ``read_again``: the targets read again for the
    person about to approve); the page also holds its decision summary and what ``person`` may do
    (one prediction for all)."""
    try:
        work = app.service.gate_page(person, workflow_id, None, "cli", read_again=read_again)
        page: GatePage = run_async(app, work)
    except PilotError as exc:
        fail(exc, json_output)
    out.show(views.gate_panel(page.view, full=full))
    return page


def _decision(page: GatePage, out: Output) -> Eligibility:
    """Show the decision summary and what the person may do, the last lines above the prompt."""
    assert page.may is not None  # asked for a door
    if page.decision is not None:
        out.show(views.decision_panel(page.decision, page.may))
    return page.may


FullOption = Annotated[
    bool, typer.Option("--full", help="Show everything: params, state now, previews, evidence, digest.")
]


def approve(
    workflow_id: WorkflowArg,
    ack_not_executed: Annotated[
        bool,
        typer.Option(
            "--ack-not-executed",
            help="State that you performed the steps handed out before this gate and checked their results.",
        ),
    ] = False,
    acknowledge_failure: Annotated[
        str,
        typer.Option(
            "--acknowledge-failure",
            metavar="REASON",
            help="Approve although Pilot predicts the run fails; your reason is recorded with the approval.",
        ),
    ] = "",
    comment: Annotated[
        str,
        typer.Option("--comment", "-m", metavar="TEXT", help="Your comment: recorded with the approval."),
    ] = "",
    full: FullOption = False,
    dispatch: DispatchOption = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Approve the gate a workflow waits at, as yourself, after seeing what it releases."""
    out = Output(json_output)
    person = operator()
    with open_app(dispatch) as app:
        page = _gate(app, workflow_id, person, out, json_output, full, read_again=True)
        view = page.view
        pending = view.pending()
        # The approval names the gate and the plan the person was shown.
        digest, gate_step = (pending.digest, pending.index) if pending else ("", None)
        ran_by_pilot = [s for s in view.already_ran if s.status in _RAN_BY_PILOT]
        if view.releases and app.dispatcher is None and ran_by_pilot:
            refuse(
                "Pilot ran this workflow's earlier steps itself; approving here without dispatch would "
                "hand the steps this gate releases to the agent instead of running them",
                _DISPATCH_HINT,
            )
        if view.releases:
            out.show(
                "Once approved, Pilot runs the released steps here."
                if app.dispatcher is not None
                else app.service.release_notice(workflow_id)
            )
        allowed = _decision(page, out)
        if not allowed.may_approve:
            refuse(
                allowed.approve_why,
                f"`vmware-pilot reject {workflow_id} --reason ...` rejects it; `vmware-pilot status "
                f"{workflow_id}` shows where it stands.",
            )

        async def asked() -> bool:  # once the engine's own checks passed: nothing changed yet
            # The terminal's question on the event loop: nothing is held or running while it waits.
            confirm(
                f"Approve this gate as {person.label}?",
                yes,
                json_output,
                "Run it in a terminal and answer the question. --yes is for the person approving, who "
                "already decided; an agent must not use it to approve on a person's behalf.",
            )
            return True

        request = ApproveRequest(
            person,
            workflow_id,
            door="cli",
            approver=person.label,
            acknowledge_not_executed=ack_not_executed,
            expected_digest=digest,
            gate_step=gate_step,
            acknowledge_failure=acknowledge_failure,
            comment=comment,
        )
        try:
            result = run_async(app, app.service.approve(request, progress=printer(out), confirm=asked))
        except PilotError as exc:
            if isinstance(exc, StepsNotExecuted):
                exc.hint = (
                    "Add --ack-not-executed only if they were performed and you checked their results; "
                    f"otherwise `vmware-pilot reject {workflow_id} --reason ...`."
                )
            elif exc.fields.get("refused") == "predicted_failure":
                exc.hint = (
                    "Fix the plan or the estate and look again, or add --acknowledge-failure REASON to "
                    f"approve anyway; otherwise `vmware-pilot reject {workflow_id} --reason ...`."
                )
            fail(exc, json_output)
    out.result(result.payload())
    if not json_output:
        out.show(views.outcome_panel(result))
    if result.is_refusal:
        raise typer.Exit(1)


def reject(
    workflow_id: WorkflowArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why: written to the audit trail.")],
    full: FullOption = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Reject the gate a workflow waits at: the workflow is cancelled, the rejection audited."""
    out = Output(json_output)
    person = operator()
    if not reason.strip():
        refuse("a rejection needs a reason", "Pass --reason 'what is wrong'.", code=2)
    with open_app() as app:
        allowed = _decision(_gate(app, workflow_id, person, out, json_output, full, read_again=False), out)
        if not allowed.may_reject:
            refuse(allowed.reject_why, f"`vmware-pilot status {workflow_id}` shows where it stands.")
        confirm(f"Reject this gate and cancel {workflow_id}?", yes, json_output)
        try:
            result = app.service.reject(
                RejectRequest(person, workflow_id, reason, rejected_by=person.label, door="cli")
            )
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result.payload())
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
            preview = _previewed(
                run_async(
                    app,
                    service.cancel_workflow(
                        CancelRequest(person, workflow_id, reason, False, ack_unknown_effects, door="cli")
                    ),
                )
            )
            radius = preview.blast_radius
            out.show(views.blast_panel("cancel", radius))
            if radius.blockers or radius.unmeasured:
                refuse(
                    "cancel is blocked: " + "; ".join([*radius.blockers, *radius.unmeasured]),
                    f"`vmware-pilot status {workflow_id}` shows every step; check the target system first.",
                )
            confirm(f"Cancel {workflow_id}?", yes, json_output)
            result = _done(
                run_async(
                    app,
                    service.cancel_workflow(
                        CancelRequest(person, workflow_id, reason, True, ack_unknown_effects, door="cli")
                    ),
                )
            )
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result.payload())
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
            preview = _previewed(
                run_async(
                    app,
                    service.rollback(
                        RollbackRequest(person, workflow_id, False, ack_unknown_effects, door="cli")
                    ),
                )
            )
            radius = preview.blast_radius
            out.show(views.blast_panel("rollback", radius))
            if radius.blockers or radius.unmeasured:
                refuse(
                    "rollback is blocked: " + "; ".join([*radius.blockers, *radius.unmeasured]),
                    f"`vmware-pilot status {workflow_id}` shows every step; check the target system first.",
                )
            if radius.would_roll_back_count and app.dispatcher is None:
                refuse(
                    "Pilot undoes steps by calling their skills' undo tools, and without dispatch every "
                    "undo would fail; nothing was changed",
                    _DISPATCH_HINT,
                )
            confirm(f"Roll back {workflow_id}?", yes, json_output)
            result = _done(
                run_async(
                    app,
                    service.rollback(
                        RollbackRequest(person, workflow_id, True, ack_unknown_effects, door="cli")
                    ),
                )
            )
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result.payload())
    if not json_output:
        out.show(views.outcome_panel(result, result.outcome or result.action or ""))
        for entry in result.rollback_results:
            out.show(Text(visible(f"  step {entry.step}: {entry.tool} → {entry.status}")))
    if result.is_failed:
        raise typer.Exit(1)
