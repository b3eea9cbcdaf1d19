"""The structural review of a plan (docs/contract.md#review): findings, summary and verdict.

A pure function of the steps; statuses are ignored, so a half-run workflow is reviewed in full.
Gate steps (``require_approval``) are counted and skipped by every other check; one gate
covers every later step. Findings come in this order: per-step findings in step order, then
``ungated_destructive``, then ``ungated_unclassified``, then group findings group by group.

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
from typing import Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.gate_options import gate_option_problem
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.refs import reference_problems
from vmware_pilot.safety.classify import Tier, classify_step
from vmware_pilot.safety.schema_check import param_problems, suggest_tools, tool_signature

__all__ = [
    "BLOCKING_KINDS",
    "FINDING_KINDS",
    "PLAN_KINDS",
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


def _param_findings(step: Step) -> Iterator[dict[str, Any]]:
    for key, value in step.params.items():
        if (value is None or value == "") and key not in _EMPTY_EXEMPT:
            yield _finding(
                "low",
                "empty_param",
                step.index,
                f"{_label(step)}: parameter '{key}' is empty; give it a value or leave it out.",
            )
        for path, text in _strings(value, str(key)):
            if _is_placeholder(text):
                yield _finding(
                    "high",
                    "placeholder_param",
                    step.index,
                    f"{_label(step)}: parameter '{path}' is still a placeholder ({text.strip()[:40]!r}); "
                    "put the real value in before running.",
                )


def _removes(step: Step) -> bool:
    tool, action = step.tool.lower(), step.action.lower()
    return any(h in tool or h in action for h in _REMOVAL_HINTS)


def _schema_findings(step: Step, catalog: Catalog) -> Iterator[dict[str, Any]]:
    if not catalog.knows_tools_of(step.skill):
        return
    pairs = [("tool", step.tool, step.params)]
    if step.rollback_tool:
        pairs.append(("rollback_tool", step.rollback_tool, step.rollback_params))
    for field, tool, params in pairs:
        params_field = "params" if field == "tool" else "rollback_params"
        if not catalog.has_tool(step.skill, tool):
            close = suggest_tools(tool, catalog.tool_names(step.skill))
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            yield _finding(
                "high",
                "unknown_tool",
                step.index,
                f"Step {step.index}: skill '{step.skill}' has no tool '{tool}' (the step's {field}).{hint} "
                "get_skill_catalog lists its tools; if the skill was upgraded since, run "
                "`vmware-pilot catalog refresh`.",
            )
            continue
        info = catalog.tool(step.skill, tool)
        schema = info.input_schema if info else None
        if not schema:
            continue
        problems = param_problems(params, schema)
        if problems:
            yield _finding(
                "high",
                "invalid_params",
                step.index,
                f"Step {step.index} ({step.skill}.{tool}): {params_field} do not fit the tool's input "
                f"schema: {'; '.join(problems)}. Fix {params_field}; {tool} takes "
                f"{tool_signature(schema)}.",
            )


def _plan_findings(wf: Workflow) -> Iterator[dict[str, Any]]:
    for problem in reference_problems(wf.steps):
        yield _finding(
            "high",
            "bad_step_reference",
            problem.step_index,
            f"{problem.message}; it can never resolve. Create a corrected workflow.",
        )
    for step in wf.steps:
        bad = gate_option_problem(step.params) if step.is_gate else None
        if bad is not None:
            yield _finding(
                "high",
                "bad_gate_option",
                step.index,
                f"Approval gate at step {step.index}: {bad[1]}. Create a corrected workflow.",
            )


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
    tiers: dict[int, tuple[Tier, str]] = {
        step.index: classify_step(step, catalog) for step in wf.steps if not step.is_gate
    }
    findings: list[dict[str, Any]] = []
    removed: list[tuple[Step, str]] = []  # (removing step, identity value it named)
    for step in wf.steps:
        if step.is_gate:
            continue
        findings.extend(_param_findings(step))
        tier = tiers[step.index][0]
        if tier is not Tier.DESTRUCTIVE:
            used = {v for v in step.params.values() if isinstance(v, str) and v}
            seen: set[str] = set()
            for earlier, value in removed:
                if value in used and value not in seen:
                    seen.add(value)
                    findings.append(
                        _finding(
                            "high",
                            "delete_then_use",
                            step.index,
                            f"{_label(step)} uses '{value}', which {_label(earlier)} removes before it; "
                            "reorder the steps or correct the value.",
                        )
                    )
        elif _removes(step):
            for key, value in step.params.items():
                if (
                    isinstance(value, str)
                    and value
                    and any(p in str(key).lower() for p in _IDENTITY_KEY_PARTS)
                ):
                    removed.append((step, value))
        findings.extend(_schema_findings(step, catalog))

    ungated = ungated_steps(wf, catalog)
    for wanted, kind in ((Tier.DESTRUCTIVE, "ungated_destructive"), (Tier.UNKNOWN, "ungated_unclassified")):
        for step, tier, reason in ungated:
            if tier is not wanted:
                continue
            what = "changes or removes something" if tier is Tier.DESTRUCTIVE else "cannot be classified"
            findings.append(
                _finding(
                    "high",
                    kind,
                    step.index,
                    f"{_label(step)} {what} ({reason}) and no require_approval step comes before it; "
                    f"insert a gate before step {step.index}.",
                )
            )

    groups: dict[str, list[Step]] = {}
    for step in wf.steps:
        if step.group_id:
            groups.setdefault(step.group_id, []).append(step)
    for group_id, members in groups.items():
        indices = [s.index for s in members]
        if indices != list(range(indices[0], indices[0] + len(indices))):
            findings.append(
                _finding(
                    "medium",
                    "non_contiguous_group",
                    indices[0],
                    f"Parallel group '{group_id}' is split (steps {indices}); put its steps next to each other.",
                )
            )
        for step in members:
            if not step.is_gate and tiers[step.index][0] is Tier.DESTRUCTIVE:
                findings.append(
                    _finding(
                        "high",
                        "destructive_in_parallel_group",
                        step.index,
                        f"{_label(step)} is destructive ({tiers[step.index][1]}) but sits in parallel group "
                        f"'{group_id}'; take it out of the group so it runs on its own.",
                    )
                )
            elif not step.is_gate and tiers[step.index][0] in (Tier.WRITE, Tier.UNKNOWN):
                findings.append(
                    _finding(
                        "high",
                        "write_in_parallel_group",
                        step.index,
                        f"{_label(step)} is not a read ({tiers[step.index][1]}) but sits in parallel group "
                        f"'{group_id}', whose steps run at the same time; only reads may share a group. "
                        "Take it out of the group.",
                    )
                )

    findings.extend(_plan_findings(wf))
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
