"""The 13 tools of vmware-pilot as data: one ``ToolSpec`` per tool, in the contract's order.

This table is the only list of the tools. Registration (name, title, description, annotations),
the built-in roles' tools, which calls run in a worker thread, which calls on one workflow take
turns, and the hint of an unexpected failure are all read from it (``server/tools.py``,
``server/pipeline.py``, ``server/errors.py``, ``safety/duties.py``). It imports nothing: the MCP
annotations are derived from ``effect`` in ``server/tools.py``, the one module that registers.

A tool's description is product copy for a model: what it does, when to use it (and which sibling
instead), its arguments, its result and the next call. ``description`` puts the ``[READ]`` or
``[WRITE]`` tag the effect implies in front of ``summary``; parameter descriptions live next to
the parameters in ``server/tools.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "DEFAULT_FAILURE_HINT",
    "QUEUED_TOOLS",
    "READ_TOOLS",
    "TOOLS",
    "TOOL_NAMES",
    "Effect",
    "ToolSpec",
    "spec_of",
]

Effect = Literal["read", "write", "destructive"]
"""``read`` changes nothing; ``write`` changes workflows; ``destructive`` may undo or end them."""

DEFAULT_FAILURE_HINT: Final = (
    "Check the arguments (get_skill_catalog lists skill and tool names; list_workflows the "
    "templates) and try again; the server log has the details under that correlation id."
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """Everything about one tool except its parameters (the tool function's signature).

    ``threaded``: the service call writes synchronously (a transaction and an fsync, or a wait for
    another process's lock) or works over a whole plan, so it runs in a worker thread and the event
    loop keeps serving others. The async tools (run, approve, rollback, cancel) save through the
    runner, which does the same; the short reads stay on the loop (thread hand-offs cost more).
    ``queued``: calls naming the same ``workflow_id`` take turns, so many callers editing one draft
    never conflict (runs, approvals and rollbacks are kept one at a time by the service itself).
    ``failure_hint``: what to do next when the tool failed unexpectedly; ``{workflow_id}`` is
    filled in.
    """

    name: str
    title: str
    effect: Effect
    summary: str
    threaded: bool = False
    queued: bool = False
    failure_hint: str = DEFAULT_FAILURE_HINT

    @property
    def description(self) -> str:
        return ("[READ] " if self.effect == "read" else "[WRITE] ") + self.summary

    @property
    def roles(self) -> frozenset[str]:
        """The built-in roles that may call it: ``admin`` every tool, ``reader`` the read tools.
        (Whether a role may approve also depends on its approve rule: ``safety/duties.py``.)"""
        return frozenset({"admin", "reader"} if self.effect == "read" else {"admin"})


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="create_workflow",
        title="Create workflow",
        effect="write",
        threaded=True,
        summary="""\
Save a custom workflow from your own step list, ready for run_workflow.

Use it when you already know the steps and no template fits; use create_workflow_from_template \
when one does, and design_workflow when the user gave a goal rather than steps. get_skill_catalog \
lists the skill and tool names a step may use.

Each step: {action, skill, tool, params, rollback_tool?, rollback_params?, group_id?}. \
action "require_approval" (skill "pilot", tool "approve") is a human approval gate. Refused, \
with nothing saved, when a destructive or unclassifiable step, or a step passing confirm=true, \
has no gate before it; the error names the step and the gate to insert (fix). A param value "__from_step_N__" (or "__from_step_N__:key") passes an earlier step's result; one that names no earlier step is refused. save_as_template=true also saves a YAML template, unless one of that name belongs to someone else.

Returns workflow_id, state "pending" and a step summary. Next: review_workflow, then \
run_workflow. Nothing is undone automatically on failure; see rollback.""",
    ),
    ToolSpec(
        name="design_workflow",
        title="Design a draft workflow",
        effect="write",
        threaded=True,
        summary="""\
Start a DRAFT workflow from a goal in plain words, to build its steps with the user.

Flow: design_workflow → update_draft (add steps, revise on feedback) → confirm_draft (state \
becomes pending) → run_workflow. Call get_skill_catalog for the tools a step may target. Use \
create_workflow instead when the steps are already known.

Returns workflow_id (state "draft"), the goal and constraints, the available skills and the \
next call.""",
    ),
    ToolSpec(
        name="update_draft",
        title="Update draft",
        effect="write",
        threaded=True,
        queued=True,
        summary="""\
Change a DRAFT workflow's name, description or steps.

Use it after design_workflow to fill in the steps, and again for each round of user feedback. \
Drafts only: after confirm_draft the steps are frozen; create_workflow a new one instead.

steps replaces the whole list; each step is {action, skill, tool, params, rollback_tool?, \
rollback_params?, group_id?} and action "require_approval" marks an approval gate. A malformed \
step is refused, naming the step and field, and nothing is saved. A draft may lack gates while \
being designed: approval_gate_violations lists every step that still needs one, and \
confirm_draft refuses until it is empty.

Returns the draft summary to show the user. Next: confirm_draft once they approve it.""",
    ),
    ToolSpec(
        name="confirm_draft",
        title="Confirm draft",
        effect="write",
        threaded=True,
        queued=True,
        summary="""\
Confirm a DRAFT the user approved: state becomes pending, ready for run_workflow.

Call update_draft instead while anything still needs changing. save_as_template=true also \
saves the steps as a custom YAML template (give the draft a name with update_draft first). \
Refused, leaving it a draft, when it has no steps or when a destructive or unclassifiable \
step, or a step passing confirm=true, has no require_approval gate before it.

Returns workflow_id, state, steps_count and whether a template was saved. Next: run_workflow.""",
    ),
    ToolSpec(
        name="create_workflow_from_template",
        title="Create workflow from template",
        effect="write",
        threaded=True,
        summary="""\
Create and save a workflow from a template, in state pending (not a dry run).

Use it when a template matches the goal: list_workflows names the built-in templates \
(incident_response, clone_and_test, compliance_scan, investigate_alert, plan_and_approve, …) \
and the custom YAML ones. Use create_workflow for your own steps when none fits.

params holds the template's inputs; a missing or unknown one is refused with the expected \
parameters. A custom YAML template whose destructive or unclassifiable step (or step passing \
confirm=true) has no require_approval gate before it is refused, naming the step and the file.

Returns workflow_id, state, a step summary and the params. Next: review_workflow, then \
run_workflow.""",
    ),
    ToolSpec(
        name="run_workflow",
        title="Run workflow",
        effect="write",
        failure_hint="Workflow '{workflow_id}' execution failed. Use get_workflow_status() to check its "
        "state, or rollback().",
        summary="""\
Advance a workflow to its next approval gate or its end.

Who performs the steps depends on how this server was started:
• default (no --dispatch): Pilot runs nothing. Steps are recorded 'not_executed' and listed in \
pending_dispatch, and the outcome is 'dispatch_required' (NOT 'completed'). YOU perform those \
skill/tool calls, in order. Steps handed to another caller are not handed to you (refused with \
handed_to); pass secrets as {"$env": "VAR"}, since a literal secret goes only to its creator.
• with --dispatch: Pilot calls each step in that skill's own MCP server, so this call lasts as \
long as the steps. If your client times out, Pilot carries on: check get_workflow_status later \
and never perform those steps yourself.

Every run starts with a structural review. Ungated destructive or unclassifiable steps, a step \
other than a read in a parallel group, or a tool or params the installed skill does not accept \
refuse the run. force=true overrides that for a built-in template only (audited), never a \
custom workflow's missing gate: add a require_approval step.

Returns the workflow with outcome (completed | awaiting_approval | dispatch_required | failed) \
and pending_dispatch when there are steps for you. At awaiting_approval, ask the human, then \
call approve.""",
    ),
    ToolSpec(
        name="approve",
        title="Approve gate",
        effect="write",
        failure_hint="Approval failed for '{workflow_id}'. Use get_workflow_status() to check its state.",
        summary="""\
Approve the gate a workflow waits at (state 'awaiting_approval') and continue the run.

Call it only after showing the user the pending step and getting explicit consent; use \
cancel_workflow when they reject it.

Without --dispatch the steps before the gate are 'not_executed': Pilot has no record that they \
ran. approve refuses, listing them in not_executed_before_gate, until \
acknowledge_not_executed=true; set it only after you performed each of them and showed the user \
the results. They become 'reported_done' and are not handed out again.

The run then continues as with run_workflow: with --dispatch Pilot runs the next steps (a long \
call; never perform them yourself), without it they come back in pending_dispatch for you.

Pass gate_step, the index of the gate you showed the user (pending_gate.index, or the gates \
list of get_workflow_status): when another gate waits by then, the approval is refused and the \
answer names the gate waiting now (show that one and ask again).

The approval is bound to the plan recorded when the gate was reached; it is refused if that plan \
changed, after the gate's expires_in_minutes, or from someone who already approved a gate that \
needs approvals_required people (the result then says how many are missing). Depending on this \
Pilot's approvals setting, the user may be asked directly in a form (your approver is ignored; \
they may also reject, which cancels the workflow), or approve may be refused: then the user \
runs `vmware-pilot approve <id>` on the Pilot host.

Returns the workflow with outcome, like run_workflow.""",
    ),
    ToolSpec(
        name="rollback",
        title="Roll back workflow",
        effect="destructive",
        failure_hint="Rollback failed for '{workflow_id}'. Use get_workflow_status() to see which steps "
        "were reversed before retrying.",
        summary="""\
Undo a workflow's executed steps, last first, best effort. Previews unless confirm=true.

Preview: blast_radius shows would_roll_back (each executed step's rollback_tool and \
rollback_params, secrets redacted), left_in_place (executed steps with no undo, they stay \
applied), not_reversed_by_pilot and not_reversible_outside_pilot (steps you performed from \
pending_dispatch: call their rollback_tool yourself, last first, or reverse them by hand), \
leaves_behind (undos that leave an object behind), unknown_effects and blockers. Nothing \
changes. Show it to the user and wait for their decision: an earlier request to roll back is \
not that decision.

Nothing rolls back automatically. Pilot reverses only steps it recorded as 'success' or, \
for an 'interrupted' step, read back as applied (without --dispatch, only approval gates). A \
failed undo does not stop the rest; the workflow ends 'failed'. confirm=true is refused for \
draft, completed, rolling_back or cancelled workflows, unreadable records, unrecognised step \
statuses and, unless acknowledge_unknown_effects=true, steps left 'running' or 'interrupted' \
whose effect Pilot could not settle by reading the target (check the target system first).

Returns the preview {action: "preview", blast_radius, hint}, or the workflow with action \
"rolled_back" ("rollback_incomplete" with outcome "failed" when an undo failed) and \
rollback_results. Then get_workflow_status.""",
    ),
    ToolSpec(
        name="cancel_workflow",
        title="Cancel workflow",
        effect="destructive",
        queued=True,
        failure_hint="Cancel failed for '{workflow_id}'. Use get_workflow_status() to check its state.",
        summary="""\
Cancel a workflow for good (state 'cancelled'). Previews unless confirm=true.

Use it when an approval is rejected, a review finds the plan unsafe, or it must never run: \
run_workflow and approve refuse a cancelled workflow. Cancel stops future steps only and undoes \
nothing (that is rollback).

Preview: blast_radius lists executed steps that stay applied (left_in_place), steps performed \
outside Pilot (performed_outside_pilot), steps already handed to you that cancel can neither \
stop nor undo (handed_out_to_caller), steps it would skip (would_skip), unknown effects and \
blockers. Nothing changes. Show it to the user and wait for their decision.

confirm=true is refused for completed, failed or cancelled workflows, unreadable records, \
unrecognised step statuses and, unless acknowledge_unknown_effects=true, steps left 'running' or \
'interrupted' whose effect Pilot could not settle by reading the target. reason goes to the audit log.

Returns the preview {action: "preview", blast_radius, hint}, or the workflow with state, \
outcome and action 'cancelled'.""",
    ),
    ToolSpec(
        name="review_workflow",
        title="Review workflow",
        effect="read",
        threaded=True,
        failure_hint="Review failed for '{workflow_id}'. Use get_workflow_status() to inspect the raw state.",
        summary="""\
Structurally review a workflow's steps before running it; calls no other skill.

Finds delete-then-use, empty or placeholder params, parallel-group problems, and destructive or \
unclassifiable steps with no require_approval gate before them. A step's tier comes from the \
skill catalog (get_skill_catalog), then from its name; a tool known to neither is \
'unclassified' and needs a gate like a destructive one. Medium-risk writes are counted but need \
no gate.

Returns verdict ("approved" | "needs_revision"), findings [{severity, kind, step_index, \
message}] and summary counts. Findings ungated_destructive, ungated_unclassified, \
destructive_in_parallel_group, write_in_parallel_group, unknown_tool and invalid_params make \
run_workflow refuse. Fix a draft with update_draft.""",
    ),
    ToolSpec(
        name="get_workflow_status",
        title="Get workflow status",
        effect="read",
        # async: it reads in worker threads itself, and waits (wait_seconds) on the loop
        failure_hint="Use list_workflows() to see active workflow IDs.",
        summary="""\
Snapshot of one workflow: state, steps with status and result, diff_report (what it \
changed so far) and audit log. Does not advance it.

Use it to follow a workflow after run_workflow or to learn why a workflow stopped: \
'not_executed' steps are yours to perform, state 'awaiting_approval' means approve (after the \
human agrees). To wait for progress (a run, someone else's approval), pass wait_seconds (up to \
60): the answer comes as soon as the workflow changes, or unchanged when the wait ends; call \
again rather than in a tight loop.

Returns the full workflow record.""",
    ),
    ToolSpec(
        name="list_workflows",
        title="List workflows and templates",
        effect="read",
        threaded=True,  # custom templates are parsed when their text changed: never on the loop
        failure_hint="The workflow store or template registry failed; the server log has the details.",
        summary="""\
List the templates (built-in and custom YAML) and the active workflows.

Call it first to see whether a template fits, then create_workflow_from_template with its name; \
use create_workflow when none does. Custom templates are YAML files in ~/.vmware/workflows/. \
active_workflows is one page, newest first: the 50 most recent unless limit (at most 500) says \
otherwise; pass next_offset as offset for the next page.

Returns {templates: [{name, type, description, steps, parameters: [{name, type, required, default, \
description}], example: the create_workflow_from_template call}], active_workflows: [{id, type, state, \
created_at, updated_at}], active_total, next_offset (null on the last page)}; pass an id to \
get_workflow_status.""",
    ),
    ToolSpec(
        name="get_skill_catalog",
        title="Get skill catalog",
        effect="read",
        summary="""\
The skills and tools a workflow step may target, with each tool's risk.

Use it while writing steps for create_workflow or update_draft; a tool's risk decides whether \
its step needs an approval gate. It is a curated catalog, not a live query of each skill, and \
Pilot calls none of these tools itself unless started with --dispatch.

Returns {skill: {description, tools: {tool: {risk, desc}}}}.""",
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)
READ_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if "reader" in t.roles)
QUEUED_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if t.queued)
_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


def spec_of(name: str) -> ToolSpec | None:
    """The spec of the tool called ``name``, or None when there is no such tool."""
    return _BY_NAME.get(name)
