"""The policy applied to workflows: which steps are denied, what a gate demands of its
approvers, which windows a step falls under, and what review and `policy explain` say.

A step is seen as a ``Subject``: its skill and tool, the names it names (the objects of
``engine.targets`` and its ``target`` parameter) and its risk tier. A denied step is refused at
every door (``refuse_denied``). A gate's demand is the strictest approval rule matching a step
it releases (``gate_rule``), recorded with the gate when a run reaches it; an approval is judged
under the stricter of that record and the policy in force then (``Demand``), so a policy change
never relaxes a waiting gate. Pure functions of the workflow, the policy, the catalog and the
time passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor, identity_key
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import GatePolicy, GateRecord
from vmware_pilot.engine.execution.gate_records import released_steps
from vmware_pilot.engine.targets import named_objects
from vmware_pilot.errors import PolicyRefused
from vmware_pilot.policy.model import (
    Policy,
    Subject,
    applicable_windows,
    denials,
    is_open,
    next_opening,
    strictest,
)
from vmware_pilot.results import ConflictsNote, DeniedStep, GateDemand, PolicyExplanation, WindowEntry
from vmware_pilot.safety.classify import classify_step

__all__ = [
    "DOORS",
    "Demand",
    "GateRule",
    "approval_refusal",
    "demand_of",
    "explain",
    "gate_rule",
    "policy_findings",
    "refuse_denied",
    "subject_of",
]

# The doors a denied step is refused at, and the verb each names.
DOORS: Final = {
    "create": "create",
    "update": "save the draft of",
    "confirm": "confirm",
    "template": "create",
    "run": "run",
    "approve": "approve",
}
MAX_NAMES: Final = 50


def _named_by_key(params: Mapping[str, Any]) -> list[str]:
    """The values of parameters whose key is ``target`` or ends in ``name`` or ``names``."""
    out: list[str] = []
    for key, value in params.items():
        if not (key == "target" or key.endswith(("name", "names"))):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.strip() and len(out) < MAX_NAMES:
                out.append(item.strip())
    return out


def subject_of(step: Step, catalog: Catalog) -> Subject:
    """``step`` as rules see it: the objects ``engine.targets`` knows it names, its ``target``
    and every parameter named ``*name`` or ``*names``."""
    names = [n.name for n in named_objects(step.skill, step.tool, step.params)]
    names += _named_by_key(step.params)
    tier = classify_step(step, catalog)[0].value
    return Subject(step.skill, step.tool, tuple(dict.fromkeys(names)), tier)


def _acting(steps: Sequence[Step]) -> list[Step]:
    return [s for s in steps if not s.is_gate]


def refuse_denied(
    policy: Policy, steps: Sequence[Step], catalog: Catalog, door: str, workflow_id: str = ""
) -> None:
    """Raise ``PolicyRefused`` naming the first denied step, its rule and the rule's reason."""
    if not policy.deny:
        return
    for step in _acting(steps):
        hits = denials(policy, subject_of(step, catalog))
        if not hits:
            continue
        rule, why = hits[0]
        whose = f"workflow '{workflow_id}'" if workflow_id else "this workflow"
        fields: dict[str, Any] = {"workflow_id": workflow_id} if workflow_id else {}
        raise PolicyRefused(
            f"Refusing to {DOORS.get(door, door)} {whose}: step {step.index} ({step.skill}.{step.tool}) is "
            f"denied by policy rule '{rule.name}': {rule.reason}. Nothing was changed",
            hint="The policy forbids this step at every door; no argument overrides it. Plan without it, "
            "or ask the operators who own the policy (docs/policies.md; `vmware-pilot policy explain`).",
            **fields,
            refused="policy_denied",
            door=door,
            step_index=step.index,
            tool=f"{step.skill}.{step.tool}",
            rule=rule.name,
            reason=rule.reason,
            matched=why,
            policy_digest=policy.digest,
        )


# --- approvals -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateRule:
    """What the policy demanded of one gate when a run reached it (kept in its gate record)."""

    rule: str
    quorum: int
    approvers: tuple[str, ...]
    requester_may_approve: bool
    max_validity_minutes: float | None
    digest: str
    step_index: int
    why: tuple[str, ...]

    def record(self) -> GatePolicy:
        return GatePolicy(
            rule=self.rule,
            quorum=self.quorum,
            approvers=list(self.approvers),
            requester_may_approve=self.requester_may_approve,
            max_validity_minutes=self.max_validity_minutes,
            policy_digest=self.digest,
            step_index=self.step_index,
            why=list(self.why),
        )

    @classmethod
    def from_record(cls, kept: GatePolicy | None) -> GateRule | None:
        if kept is None:
            return None
        return cls(
            rule=kept.rule,
            quorum=kept.quorum,
            approvers=tuple(kept.approvers),
            requester_may_approve=kept.requester_may_approve,
            max_validity_minutes=kept.max_validity_minutes,
            digest=kept.policy_digest,
            step_index=kept.step_index,
            why=tuple(kept.why),
        )


def gate_rule(policy: Policy, wf: Workflow, gate_index: int, catalog: Catalog) -> GateRule | None:
    """The strictest approval rule matching a step gate ``gate_index`` releases (None: none does)."""
    if not policy.approvals:
        return None
    steps = released_steps(wf, gate_index)
    subjects = [subject_of(s, catalog) for s in steps]
    found = strictest(policy.approvals, subjects)
    if found is None:
        return None
    rule, subject, why = found
    index = steps[subjects.index(subject)].index
    return GateRule(
        rule.name,
        rule.quorum,
        rule.approvers,
        rule.requester_may_approve,
        rule.max_validity_minutes,
        policy.digest,
        index,
        tuple(why),
    )


@dataclass(frozen=True, slots=True)
class Demand:
    """The stricter of a gate's recorded rule and the rule of the policy in force: every rule's
    approver list must be met, the largest quorum and the shortest validity apply."""

    rules: tuple[GateRule, ...]

    @property
    def quorum(self) -> int:
        return max((r.quorum for r in self.rules), default=1)

    @property
    def requester_may_approve(self) -> bool:
        return all(r.requester_may_approve for r in self.rules)

    @property
    def max_validity_minutes(self) -> float | None:
        values = [r.max_validity_minutes for r in self.rules if r.max_validity_minutes is not None]
        return min(values) if values else None

    def names(self) -> str:
        return " and ".join(f"'{r.rule}'" for r in self.rules)


def demand_of(recorded: GateRule | None, current: GateRule | None) -> Demand:
    rules = [r for r in (recorded, current) if r is not None]
    if len(rules) == 2 and rules[0] == rules[1]:
        rules = rules[:1]
    return Demand(tuple(rules))


def _is_requester(wf: Workflow, actor: Actor, who: str) -> bool:
    people = [p for p in (wf.created_by, *wf.authors) if p.strip()]
    if actor.authenticated and any(actor.is_same_person(p) for p in people):
        return True
    return identity_key(who) in {identity_key(p) for p in people}


def approval_refusal(
    demand: Demand,
    wf: Workflow,
    gate: Step,
    actor: Actor,
    who: str,
    now: datetime,
    record: GateRecord | None,
) -> PolicyRefused | None:
    """Why the policy refuses ``who`` (``actor``) approving ``gate`` now; None when it does not."""
    where = f"workflow '{wf.id}' (gate at step {gate.index})"
    base: dict[str, Any] = {"workflow_id": wf.id, "state": wf.state.value}
    for rule in demand.rules:
        if not rule.requester_may_approve and _is_requester(wf, actor, who):
            return PolicyRefused(
                f"Refusing to approve {where}: policy rule '{rule.rule}' does not let the requester "
                f"approve, and {who} created or edited this workflow",
                hint="Another person has to approve it (the policy's approvers: "
                f"{', '.join(rule.approvers) or 'any role that may approve'}).",
                **base,
                refused="policy_requester",
                rule=rule.rule,
                policy_digest=rule.digest,
            )
        if rule.approvers:
            held = {actor.role, *actor.groups}
            if not held & set(rule.approvers):
                return PolicyRefused(
                    f"Refusing to approve {where}: policy rule '{rule.rule}' lets only "
                    f"{', '.join(rule.approvers)} approve, and {actor.label} holds "
                    f"{', '.join(sorted(held)) or 'no role'}",
                    hint="Someone holding one of those roles or identity-provider groups has to approve it.",
                    **base,
                    refused="policy_approvers",
                    rule=rule.rule,
                    approvers=list(rule.approvers),
                    policy_digest=rule.digest,
                )
    validity = demand.max_validity_minutes
    reached = record.reached_at if record else None
    if validity is not None and reached is not None and now >= reached + timedelta(minutes=validity):
        expired = iso(reached + timedelta(minutes=validity))
        return PolicyRefused(
            f"Refusing to approve {where}: the gate expired at {expired} (policy rule {demand.names()} "
            f"allows {validity:g} minutes); an expired approval request cannot be approved",
            hint=f"Reject it (`vmware-pilot reject {wf.id} --reason ...`) or cancel_workflow, then create a "
            "new workflow if the change is still wanted.",
            **base,
            refused="gate_expired",
            expired_at=expired,
            rule=demand.rules[0].rule if demand.rules else "",
        )
    return None


# --- what review and explain say -------------------------------------------------------------------


def _window_entries(policy: Policy, step: Step, subject: Subject, now: datetime) -> list[WindowEntry]:
    out: list[WindowEntry] = []
    governing = applicable_windows(policy.windows, subject)
    if not governing:
        return out
    open_now = is_open(governing, subject, now)
    opening = None if open_now else next_opening(governing, subject, now)
    for window in governing:
        out.append(
            WindowEntry(
                step_index=step.index,
                window=window.name,
                blackout=window.blackout,
                active_now=window.active(now),
                approvers=list(window.approvers),
            )
        )
    if out:
        out[-1] = out[-1].but(open_now=open_now, next_opening=iso(opening) if opening is not None else None)
    return out


def explain(
    policy: Policy,
    wf: Workflow,
    catalog: Catalog,
    now: datetime,
    conflicts: Sequence[Mapping[str, Any]] = (),
) -> PolicyExplanation:
    """Which rules apply to ``wf``'s steps and gates, and why: ``denied``, ``approvals`` (per gate:
    the rule whose demand applies, or none), ``windows`` (per step they govern: open now, next
    opening) and ``conflicts`` (the mode, and the workflows holding objects this one writes, when
    the caller knows them)."""
    denied: list[DeniedStep] = []
    windows: list[WindowEntry] = []
    for step in _acting(wf.steps):
        subject = subject_of(step, catalog)
        for rule, why in denials(policy, subject):
            denied.append(
                DeniedStep(
                    step_index=step.index,
                    tool=f"{step.skill}.{step.tool}",
                    rule=rule.name,
                    reason=rule.reason,
                    why=why,
                )
            )
        windows += _window_entries(policy, step, subject, now)
    approvals: list[GateDemand] = []
    for gate in (s for s in wf.steps if s.is_gate):
        found = gate_rule(policy, wf, gate.index, catalog)
        if found is None:
            approvals.append(
                GateDemand(
                    gate_step=gate.index,
                    rule=None,
                    quorum=None,
                    approvers=[],
                    why=["no approval rule matches a step it releases"],
                )
            )
        else:
            approvals.append(
                GateDemand(
                    gate_step=gate.index,
                    rule=found.rule,
                    quorum=found.quorum,
                    approvers=list(found.approvers),
                    requester_may_approve=found.requester_may_approve,
                    max_validity_minutes=found.max_validity_minutes,
                    step_index=found.step_index,
                    why=list(found.why),
                )
            )
    return PolicyExplanation(
        policy_digest=policy.digest,
        denied=denied,
        approvals=approvals,
        windows=windows,
        conflicts=ConflictsNote(mode=policy.conflicts.mode, conflicting=list(conflicts)),
    )


def policy_findings(explained: PolicyExplanation) -> list[dict[str, Any]]:
    """Review findings from ``explain``'s answer: a denied step is ``policy_denied`` (high: it can
    never run); a gate's demand, a closed window are ``policy_approval`` and ``policy_window``
    (low: what will be asked, not a fault of the plan); a held object ``policy_conflict`` (medium)."""
    out: list[dict[str, Any]] = []
    for d in explained.denied:
        out.append(
            {
                "severity": "high",
                "kind": "policy_denied",
                "step_index": d.step_index,
                "message": f"{d.tool} is denied by policy rule '{d.rule}': {d.reason}",
            }
        )
    for a in explained.approvals:
        if a.rule is None:
            continue
        who = ", ".join(a.approvers) or "any role that may approve"
        extra = "; the requester may not approve" if not a.requester_may_approve else ""
        valid = a.max_validity_minutes
        extra += f"; valid {valid:g} minutes at most" if valid is not None else ""
        out.append(
            {
                "severity": "low",
                "kind": "policy_approval",
                "step_index": a.gate_step,
                "message": f"policy rule '{a.rule}' requires {a.quorum} approval(s) by {who}{extra}",
            }
        )
    for w in explained.windows:
        if w.open_now is None or w.open_now:
            continue
        when = f"; it opens at {w.next_opening}" if w.next_opening else "; it does not open again"
        out.append(
            {
                "severity": "low",
                "kind": "policy_window",
                "step_index": w.step_index,
                "message": f"outside its change window now (window '{w.window}'){when}",
            }
        )
    for c in explained.conflicts.conflicting:
        out.append(
            {
                "severity": "medium",
                "kind": "policy_conflict",
                "step_index": c.step_index,
                "message": c.message
                if c.has("message")
                else "an object this step writes is held by another workflow",
            }
        )
    return out
