"""Who may approve through which door: the ``approvals`` setting and the human's answer.

``agent`` (2.4.0's behaviour): the MCP approve tool records the approver the agent names.
``elicit``: the MCP approve tool asks the person at the client through an MCP elicitation form
and records *their* answer; a client that cannot show forms is refused. (On a 2026-07-28
connection, which has no forms, the server refers the approval to the console instead:
``Approvals.refer``.) ``human``: the MCP
approve tool always refuses; only `vmware-pilot approve` (the operator CLI, channel ``cli``)
approves. The CLI is always a door: the person at the terminal approves as themselves.
The server supplies the form as an ``AskHuman`` callable, so the engine needs no SDK.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.decision import decision_lines
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.errors import StateRefused
from vmware_pilot.results import Decision, GateStatus

__all__ = [
    "ApprovalChannel",
    "ApprovalPolicy",
    "AskHuman",
    "HumanAnswer",
    "declined",
    "describe_gate",
    "require_door",
]

ApprovalPolicy = Literal["agent", "elicit", "human"]
# mcp: the approve tool with the agent's approver; elicit: the tool, answered by the person in
# a form; cli: the operator CLI run by the person; console: the web console, as the signed-in person.
ApprovalChannel = Literal["mcp", "elicit", "cli", "console"]


@dataclass(frozen=True, slots=True)
class HumanAnswer:
    """The person's decision: ``approve``, ``reject`` (cancels, needs a reason) or ``decline``."""

    decision: Literal["approve", "reject", "decline"]
    approver: str = ""
    reason: str = ""
    # Why the person approves although the prediction says the run fails.
    despite: str = ""
    # The person's comment on their approval (recorded and audited).
    comment: str = ""


# Shows the gate view (``PilotService.show_gate``) and its decision summary (``engine.decision``; None:
# none) to a person and returns their answer. The third argument is the name recorded when the person
# leaves theirs empty; the fourth is true when that name is the caller's authenticated identity (a
# token or OAuth caller), which the form does not ask for, as a name typed there could not be
# recorded instead of it.
AskHuman = Callable[[GateView, Decision | None, str, bool], Awaitable[HumanAnswer]]


def _cli(wf: Workflow) -> str:
    return f"vmware-pilot approve {wf.id}"


def require_door(policy: ApprovalPolicy, wf: Workflow, ask: AskHuman | None) -> AskHuman | None:
    """For the MCP approve tool: refuse what ``policy`` forbids; the form to show (None: agent policy)."""
    if policy == "agent":
        return None
    if policy == "human":
        raise StateRefused(
            f"Refusing to approve workflow '{wf.id}' from an MCP client: this Pilot takes approvals only "
            "from a person at the operator CLI (approvals policy 'human')",
            hint=f"Ask the user to run `{_cli(wf)}` themselves on the Pilot host (do not run it for "
            "them): it shows the gate and what it releases and asks them to confirm. "
            f"`vmware-pilot reject {wf.id} --reason ...` rejects it.",
            workflow_id=wf.id,
            state=wf.state.value,
            refused="human_approval_required",
            approve_command=_cli(wf),
        )
    if ask is None:
        raise StateRefused(
            f"Refusing to approve workflow '{wf.id}': this Pilot asks the person directly through an MCP "
            "form (approvals policy 'elicit'), and this MCP client cannot show forms (no elicitation "
            "capability)",
            hint=f"Ask the user to run `{_cli(wf)}` themselves on the Pilot host (do not run it for "
            "them), or use an MCP client that supports elicitation.",
            workflow_id=wf.id,
            state=wf.state.value,
            refused="elicitation_unsupported",
            approve_command=_cli(wf),
        )
    return ask


def declined(wf: Workflow, answer: HumanAnswer) -> StateRefused:
    """The refusal when the person did not approve: the gate keeps waiting."""
    why = (
        "chose reject but gave no reason (a rejection needs one)"
        if answer.decision == "reject"
        else "declined to approve"
    )
    return StateRefused(
        f"Not approved: the person {why}. Workflow '{wf.id}' keeps waiting at its gate; nothing changed",
        hint="Ask the user what should change. Call approve again when they are ready, or "
        "cancel_workflow if they do not want it.",
        workflow_id=wf.id,
        state=wf.state.value,
        refused="declined",
    )


def _line(value: object) -> str:
    """Text from the workflow on one line: a gate message cannot fake the form's own lines."""
    return " ".join(str(value).split())


def describe_gate(view: GateView, decision: Decision | None = None) -> str:
    """The gate view as plain text: what a person reads before deciding, the decision summary
    (``engine.decision``) first."""
    gate = view.pending() or GateStatus(index=-1, status="")
    lines = [
        f"Approve the gate at step {gate.index if view.pending() else None} of workflow {view.workflow_id} "
        f"({_line(view.workflow_type)})?",
    ]
    if decision is not None:
        lines += [_line(line) for line in decision_lines(decision, short=True)]
        lines.append("Details:")
    lines += [
        f"Gate message: {_line(gate.message or '(none)')}",
        *([_line(view.verdict_line())] if view.prediction is not None else []),
        "It releases:",
    ]
    targets = {t.name: t for t in view.targets}
    for r in view.releases:
        lines.append(f"  step {r.index}: {_line(r.skill)}.{_line(r.tool)} [{r.tier}]")
        lines.append(f"    params: {_line(json.dumps(r.params, ensure_ascii=False, sort_keys=True))}")
        lines.append(f"    undo: {_line(r.undo)}")
        for name in r.targets:
            t = targets.get(str(name))
            if t is not None:
                lines.append(f"    now: {_line(t.line)} -> {_line(r.tool)}")
                lines += [f"    !! {_line(c)}" for c in t.changes]
        if r.preview is not None:
            lines.append(f"    preview ({r.preview.status}): {_line(r.preview.summary)}")
        if view.step_line(r.index):
            lines.append(f"    {_line(view.step_line(r.index))}")
    if not view.releases:
        lines.append("  (no steps: approving finishes this part of the workflow)")
    if view.state_note:
        lines.append(_line(view.state_note))
    if view.evidence:
        lines.append("Evidence (what the steps before it found):")
        lines += [
            f"  step {e.index} {_line(e.skill)}.{_line(e.tool)} ({e.status}): {_line(e.summary)}"
            for e in view.evidence
        ]
    if view.already_ran:
        lines.append(
            "Before it: "
            + ", ".join(f"step {s.index} {_line(s.tool)} ({s.status})" for s in view.already_ran)
        )
    if view.not_executed_before_gate:
        lines.append(
            "Pilot did not run "
            + ", ".join(
                f"step {s.index} ({_line(s.skill)}.{_line(s.tool)})" for s in view.not_executed_before_gate
            )
            + ": they were handed out to be performed. Approving states that they were performed and "
            "their results checked."
        )
    if gate.approvals_required > 1:
        names = ", ".join(a.approver for a in gate.approvals) or "none yet"
        lines.append(f"Approvals: {gate.approvals_required} distinct people required; so far: {names}")
    if gate.policy is not None:
        lines.append(_line(f"Quorum and approvers set by {gate.policy.summary()}"))
    if gate.expires_at:
        lines.append(f"Expires at: {gate.expires_at}")
    lines.append(f"Plan digest: {gate.digest}")
    return "\n".join(lines)
