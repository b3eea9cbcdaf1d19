"""The structural review of a plan (docs/contract.md#review): findings, summary and verdict.

A pure function of the steps; statuses are ignored, so a half-run workflow is reviewed in full.
Gate steps (``require_approval``) are counted and skipped by every other check; one gate
covers every later step. Findings come in this order: per-step findings in step order, then
``ungated_destructive``, then ``ungated_unclassified``, then group findings group by group,
then the plan findings.

Each kind of finding is one small named rule (``safety.rules``) in a list by what it looks at
(a parameter, a step, a tool a step names, the gating, a group, a group's member, the plan);
``_walk`` visits them in the order above. ``REVIEW_RULES`` lists them all.

Beyond 2.4.0:
- when the catalog knows a skill's full tool list, ``unknown_tool`` and ``invalid_params``
  (both high) check the tool name and params (and the rollback pair) against the real tools;
- ``placeholder_param`` flags what reads as a placeholder (``TODO``, ``REVIEW``, ``FIXME``,
  ``TBD``, ``CHANGEME`` in capitals, ``TODO: …``, ``<vm name>``, ``{{vm}}``), not a lower-case
  real name such as a VM called ``review``;
- ``delete_then_use`` starts from steps that remove something (delete/remove/destroy/drop…),
  not from every destructive step: powering a VM off and on again is not a use-after-delete.

- ``bad_step_reference`` and ``bad_gate_option`` (high) report what every door refuses today
  but a record stored earlier may hold: a step reference that can never resolve, a gate option
  that is not a usable value.

``run_workflow`` refuses on ``blocking_findings(review)``: the ``BLOCKING_KINDS`` of 2.4.0 plus
``unknown_tool`` and ``invalid_params``, since such a step can only fail at the skill (``force``
overrides them for a built-in, e.g. when the discovery cache is older than the skill), plus the
``PLAN_KINDS``, which ``force`` never overrides: nothing can make such a plan right.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.gate_options import gate_option_problem
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.refs import reference_problems
from vmware_pilot.safety.classify import Tier, classify_step
from vmware_pilot.safety.rules import Rule, every, rule
from vmware_pilot.safety.schema_check import param_problems, suggest_tools, tool_signature

__all__ = [
    "BLOCKING_KINDS",
    "FINDING_KINDS",
    "PLAN_KINDS",
    "REVIEW_RULES",
    "RUN_BLOCKING_KINDS",
    "SCHEMA_KINDS",
    "blocking_findings",
    "est_duration_min",
    "review",
    "ungated_steps",
]

FINDING_KINDS: Final = (
    "empty_param",
    "placeholder_param",
    "delete_then_use",
    "unknown_tool",
    "invalid_params",
    "ungated_destructive",
    "ungated_unclassified",
    "non_contiguous_group",
    "destructive_in_parallel_group",
    "write_in_parallel_group",
    "bad_step_reference",
    "bad_gate_option",
)
BLOCKING_KINDS: Final = frozenset(
    {"ungated_destructive", "ungated_unclassified", "destructive_in_parallel_group"}
)
SCHEMA_KINDS: Final = frozenset({"unknown_tool", "invalid_params"})
PLAN_KINDS: Final = frozenset({"bad_step_reference", "bad_gate_option"})
# Members of a parallel group run at the same time, so only reads may share one.
RUN_BLOCKING_KINDS: Final = BLOCKING_KINDS | SCHEMA_KINDS | PLAN_KINDS | {"write_in_parallel_group"}

_EMPTY_EXEMPT = frozenset({"target", "description"})
_PLACEHOLDER_WORDS = frozenset({"REVIEW", "TODO", "FIXME", "TBD", "CHANGEME"})
_PLACEHOLDER_SHAPES = (
    re.compile(r"^(?:TODO|FIXME|TBD|CHANGEME)\b\s*[:\-]"),  # "TODO: fill in"
    re.compile(r"^<[^<>]+>$"),  # "<vm name>"
    re.compile(r"\{\{\s*\w+\s*\}\}"),  # a template {{name}} left in place (not Go's {{.Names}})
    re.compile(r"^\$\{[^{}]+\}$"),  # "${VM_NAME}"
)
_REMOVAL_HINTS = ("delete", "remove", "destroy", "drop", "purge", "unregister", "decommission")
_IDENTITY_KEY_PARTS = ("name", "id", "vm", "segment", "rule", "policy")


def _finding(severity: str, kind: str, step_index: int, message: str) -> dict[str, Any]:
    return {"severity": severity, "kind": kind, "step_index": step_index, "message": message}


def _label(step: Step) -> str:
    return f"step {step.index} ({step.skill}.{step.tool})"


def _is_placeholder(value: str) -> bool:
    text = value.strip()
    return text in _PLACEHOLDER_WORDS or any(p.search(text) for p in _PLACEHOLDER_SHAPES)


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, string) for every string inside ``value``."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _removes(step: Step) -> bool:
    tool, action = step.tool.lower(), step.action.lower()
    return any(h in tool or h in action for h in _REMOVAL_HINTS)


# --- what the rules look at -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PlanView:
    """The plan under review: its steps' tiers (gates have none), its parallel groups in order
    of first appearance, and the names removing steps remove (with the position of the step)."""

    wf: Workflow
    catalog: Catalog
    tiers: dict[int, tuple[Tier, str]]
    groups: dict[str, list[Step]]
    removals: list[tuple[int, Step, str]]
    ungated: list[tuple[Step, Tier, str]]

    @classmethod
    def of(cls, wf: Workflow, catalog: Catalog) -> PlanView:
        tiers = {step.index: classify_step(step, catalog) for step in wf.steps if not step.is_gate}
        groups: dict[str, list[Step]] = {}
        for step in wf.steps:
            if step.group_id:
                groups.setdefault(step.group_id, []).append(step)
        removals = [
            (position, step, value)
            for position, step in enumerate(wf.steps)
            if not step.is_gate and tiers[step.index][0] is Tier.DESTRUCTIVE and _removes(step)
            for key, value in step.params.items()
            if isinstance(value, str) and value and any(p in str(key).lower() for p in _IDENTITY_KEY_PARTS)
        ]
        return cls(wf, catalog, tiers, groups, removals, ungated_steps(wf, catalog))

    def tier(self, step: Step) -> Tier:
        return self.tiers[step.index][0]


@dataclass(frozen=True, slots=True)
class StepView:
    """One non-gate step at ``position`` in the plan."""

    plan: PlanView
    position: int
    step: Step


@dataclass(frozen=True, slots=True)
class ParamView:
    """One top-level parameter of a non-gate step."""

    step: Step
    key: str
    value: Any


@dataclass(frozen=True, slots=True)
class CallView:
    """One tool a step names (``field`` is ``tool`` or ``rollback_tool``) with its params, and
    whether the skill has that tool (``known``)."""

    catalog: Catalog
    step: Step
    field: str
    tool: str
    params: Mapping[str, Any]
    known: bool


@dataclass(frozen=True, slots=True)
class GroupView:
    """One parallel group: its id and its steps in plan order."""

    group_id: str
    members: list[Step]


@dataclass(frozen=True, slots=True)
class MemberView:
    """One step of a parallel group."""

    plan: PlanView
    group_id: str
    step: Step


Findings = Iterator[dict[str, Any]]


# --- each parameter of each step --------------------------------------------------------------
@rule("empty_param")
def _empty_param(p: ParamView) -> Findings:
    """A parameter given as null or "" (``target`` and ``description`` may be empty)."""
    if (p.value is None or p.value == "") and p.key not in _EMPTY_EXEMPT:
        yield _finding(
            "low",
            "empty_param",
            p.step.index,
            f"{_label(p.step)}: parameter '{p.key}' is empty; give it a value or leave it out.",
        )


@rule("placeholder_param")
def _placeholder_param(p: ParamView) -> Findings:
    """A string anywhere inside the parameter that reads as a placeholder (TODO, <vm name>, {{vm}})."""
    for path, text in _strings(p.value, str(p.key)):
        if _is_placeholder(text):
            yield _finding(
                "high",
                "placeholder_param",
                p.step.index,
                f"{_label(p.step)}: parameter '{path}' is still a placeholder ({text.strip()[:40]!r}); "
                "put the real value in before running.",
            )


# --- each step ----------------------------------------------------------------------------------
@rule("delete_then_use")
def _delete_then_use(v: StepView) -> Findings:
    """A non-destructive step using a name (a string param value) that an earlier removing step
    (delete/remove/destroy…) names in an identity parameter; once per name."""
    if v.plan.tier(v.step) is Tier.DESTRUCTIVE:
        return
    used = {value for value in v.step.params.values() if isinstance(value, str) and value}
    seen: set[str] = set()
    for position, earlier, value in v.plan.removals:
        if position < v.position and value in used and value not in seen:
            seen.add(value)
            yield _finding(
                "high",
                "delete_then_use",
                v.step.index,
                f"{_label(v.step)} uses '{value}', which {_label(earlier)} removes before it; "
                "reorder the steps or correct the value.",
            )


# --- each tool a step names (the tool, then the rollback tool) --------------------------------
@rule("unknown_tool")
def _unknown_tool(c: CallView) -> Findings:
    """A tool the skill does not have, when the catalog knows the skill's full tool list."""
    if not c.known:
        close = suggest_tools(c.tool, c.catalog.tool_names(c.step.skill))
        hint = f" Did you mean {' or '.join(repr(t) for t in close)}?" if close else ""
        yield _finding(
            "high",
            "unknown_tool",
            c.step.index,
            f"Step {c.step.index}: skill '{c.step.skill}' has no tool '{c.tool}' (the step's {c.field}).{hint} "
            "get_skill_catalog lists its tools; if the skill was upgraded since, run "
            "`vmware-pilot catalog refresh`.",
        )


@rule("invalid_params")
def _invalid_params(c: CallView) -> Findings:
    """Params (or rollback params) that do not fit the known tool's input schema."""
    if not c.known:
        return
    info = c.catalog.tool(c.step.skill, c.tool)
    schema = info.input_schema if info else None
    if not schema:
        return
    params_field = "params" if c.field == "tool" else "rollback_params"
    problems = param_problems(c.params, schema)
    if problems:
        yield _finding(
            "high",
            "invalid_params",
            c.step.index,
            f"Step {c.step.index} ({c.step.skill}.{c.tool}): {params_field} do not fit the tool's input "
            f"schema: {'; '.join(problems)}. Fix {params_field}; {c.tool} takes "
            f"{tool_signature(schema)}.",
        )


# --- the plan's gating --------------------------------------------------------------------------
def _ungated(v: PlanView, wanted: Tier, kind: str) -> Findings:
    for step, tier, reason in v.ungated:
        if tier is not wanted:
            continue
        what = "changes or removes something" if tier is Tier.DESTRUCTIVE else "cannot be classified"
        yield _finding(
            "high",
            kind,
            step.index,
            f"{_label(step)} {what} ({reason}) and no require_approval step comes before it; "
            f"insert a gate before step {step.index}.",
        )


@rule("ungated_destructive")
def _ungated_destructive(v: PlanView) -> Findings:
    """A destructive step with no require_approval gate before it."""
    yield from _ungated(v, Tier.DESTRUCTIVE, "ungated_destructive")


@rule("ungated_unclassified")
def _ungated_unclassified(v: PlanView) -> Findings:
    """A step whose risk cannot be classified, with no require_approval gate before it."""
    yield from _ungated(v, Tier.UNKNOWN, "ungated_unclassified")


# --- each parallel group, then each of its members ----------------------------------------------
@rule("non_contiguous_group")
def _non_contiguous_group(g: GroupView) -> Findings:
    """A parallel group whose steps are not next to each other."""
    group_id, indices = g.group_id, [s.index for s in g.members]
    if indices != list(range(indices[0], indices[0] + len(indices))):
        yield _finding(
            "medium",
            "non_contiguous_group",
            indices[0],
            f"Parallel group '{group_id}' is split (steps {indices}); put its steps next to each other.",
        )


@rule("destructive_in_parallel_group")
def _destructive_in_parallel_group(m: MemberView) -> Findings:
    """A destructive step inside a parallel group."""
    if not m.step.is_gate and m.plan.tier(m.step) is Tier.DESTRUCTIVE:
        yield _finding(
            "high",
            "destructive_in_parallel_group",
            m.step.index,
            f"{_label(m.step)} is destructive ({m.plan.tiers[m.step.index][1]}) but sits in parallel group "
            f"'{m.group_id}'; take it out of the group so it runs on its own.",
        )


@rule("write_in_parallel_group")
def _write_in_parallel_group(m: MemberView) -> Findings:
    """A write or unclassifiable step inside a parallel group (only reads may share one)."""
    if not m.step.is_gate and m.plan.tier(m.step) in (Tier.WRITE, Tier.UNKNOWN):
        yield _finding(
            "high",
            "write_in_parallel_group",
            m.step.index,
            f"{_label(m.step)} is not a read ({m.plan.tiers[m.step.index][1]}) but sits in parallel group "
            f"'{m.group_id}', whose steps run at the same time; only reads may share a group. "
            "Take it out of the group.",
        )


# --- the whole plan -------------------------------------------------------------------------------
@rule("bad_step_reference")
def _bad_step_reference(v: PlanView) -> Findings:
    """A __from_step_N__ reference that can never resolve (a record stored before doors refused it)."""
    for problem in reference_problems(v.wf.steps):
        yield _finding(
            "high",
            "bad_step_reference",
            problem.step_index,
            f"{problem.message}; it can never resolve. Create a corrected workflow.",
        )


@rule("bad_gate_option")
def _bad_gate_option(v: PlanView) -> Findings:
    """A gate whose expires_in_minutes or approvals_required is not a usable value."""
    for step in v.wf.steps:
        bad = gate_option_problem(step.params) if step.is_gate else None
        if bad is not None:
            yield _finding(
                "high",
                "bad_gate_option",
                step.index,
                f"Approval gate at step {step.index}: {bad[1]}. Create a corrected workflow.",
            )


# The rules by what they look at. ``review`` walks the plan in this order: for each non-gate
# step, its parameters (PARAM_RULES per parameter), the step (STEP_RULES), its tool and
# rollback tool (CALL_RULES, when the catalog knows the skill's tools); then GATING_RULES; then
# each group (GROUP_RULES) and its members (MEMBER_RULES); then PLAN_RULES.
PARAM_RULES: Final[tuple[Rule[ParamView, Findings], ...]] = (_empty_param, _placeholder_param)
STEP_RULES: Final[tuple[Rule[StepView, Findings], ...]] = (_delete_then_use,)
CALL_RULES: Final[tuple[Rule[CallView, Findings], ...]] = (_unknown_tool, _invalid_params)
GATING_RULES: Final[tuple[Rule[PlanView, Findings], ...]] = (_ungated_destructive, _ungated_unclassified)
GROUP_RULES: Final[tuple[Rule[GroupView, Findings], ...]] = (_non_contiguous_group,)
MEMBER_RULES: Final[tuple[Rule[MemberView, Findings], ...]] = (
    _destructive_in_parallel_group,
    _write_in_parallel_group,
)
PLAN_RULES: Final[tuple[Rule[PlanView, Findings], ...]] = (_bad_step_reference, _bad_gate_option)
REVIEW_RULES: Final[tuple[Rule[Any, Findings], ...]] = (
    *PARAM_RULES,
    *STEP_RULES,
    *CALL_RULES,
    *GATING_RULES,
    *GROUP_RULES,
    *MEMBER_RULES,
    *PLAN_RULES,
)


def _calls(step: Step, catalog: Catalog) -> Iterator[CallView]:
    if not catalog.knows_tools_of(step.skill):
        return
    yield CallView(
        catalog, step, "tool", step.tool, step.params, bool(catalog.has_tool(step.skill, step.tool))
    )
    if step.rollback_tool:
        known = bool(catalog.has_tool(step.skill, step.rollback_tool))
        yield CallView(catalog, step, "rollback_tool", step.rollback_tool, step.rollback_params, known)


def _walk(v: PlanView) -> Findings:
    """Every rule over what it looks at, in the order of the module docstring."""
    for position, step in enumerate(v.wf.steps):
        if step.is_gate:
            continue
        for key, value in step.params.items():
            yield from every(PARAM_RULES, ParamView(step, key, value))
        yield from every(STEP_RULES, StepView(v, position, step))
        for call in _calls(step, v.catalog):
            yield from every(CALL_RULES, call)
    yield from every(GATING_RULES, v)
    for group_id, members in v.groups.items():
        yield from every(GROUP_RULES, GroupView(group_id, members))
        for step in members:
            yield from every(MEMBER_RULES, MemberView(v, group_id, step))
    yield from every(PLAN_RULES, v)


def ungated_steps(wf: Workflow, catalog: Catalog) -> list[tuple[Step, Tier, str]]:
    """Destructive or unclassifiable steps with no gate at a lower index, with tier and reason."""
    out: list[tuple[Step, Tier, str]] = []
    for step in wf.steps:
        if step.is_gate:
            break
        tier, reason = classify_step(step, catalog)
        if tier in (Tier.DESTRUCTIVE, Tier.UNKNOWN):
            out.append((step, tier, reason))
    return out


def est_duration_min(read_only: int, destructive: int, gates: int, groups: int) -> float:
    """2.4.0's rough estimate in minutes (writes and unknowns count nothing)."""
    return round(max(0.5, 0.2 * read_only + 1.5 * destructive + 5.0 * gates - 0.5 * groups), 1)


def review(wf: Workflow, catalog: Catalog) -> dict[str, Any]:
    """``{workflow_id, verdict, findings, summary}``; verdict ``needs_revision`` on any high finding."""
    view = PlanView.of(wf, catalog)
    findings = list(_walk(view))
    tiers, groups = view.tiers, view.groups
    counts = {tier: sum(1 for t, _ in tiers.values() if t is tier) for tier in Tier}
    gates = sum(1 for s in wf.steps if s.is_gate)
    summary = {
        "total_steps": len(wf.steps),
        "destructive_steps": counts[Tier.DESTRUCTIVE],
        "write_steps": counts[Tier.WRITE],
        "read_only_steps": counts[Tier.READ],
        "classified_steps": counts[Tier.DESTRUCTIVE] + counts[Tier.WRITE] + counts[Tier.READ],
        "unclassified_steps": counts[Tier.UNKNOWN],
        "approval_gates": gates,
        "parallel_groups": len(groups),
        "est_duration_min": est_duration_min(counts[Tier.READ], counts[Tier.DESTRUCTIVE], gates, len(groups)),
    }
    verdict = "needs_revision" if any(f["severity"] == "high" for f in findings) else "approved"
    return {"workflow_id": wf.id, "verdict": verdict, "findings": findings, "summary": summary}


def blocking_findings(
    review_result: Mapping[str, Any], kinds: frozenset[str] = RUN_BLOCKING_KINDS
) -> list[dict[str, Any]]:
    """The findings of ``review_result`` that make run_workflow refuse (``kinds``), in order."""
    return [f for f in review_result.get("findings", []) if f.get("kind") in kinds]
