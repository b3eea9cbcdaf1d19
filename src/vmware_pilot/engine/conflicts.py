"""Conflict locks: no two workflows write one object at once (issue 26).

A workflow that runs holds every object its write steps name (``locked_objects``: the step
parameters ``engine.targets`` reads a gate's objects from, per kind and target), from its run
(or the approval that releases it) while it runs, waits at a gate or rolls back, until it ends
or is cancelled, or its Pilot dies (its run lease lapses); the rows live in the database beside the run leases (store/locks.py), so
replicas share them. All of a workflow's objects are taken at once, before its first write
could go out, so two workflows never each hold what the other waits for.

Another workflow whose write steps name a held object is refused at ``run_workflow`` and at the
approval that would release it (nothing changed), naming the holder, its state and its owner;
with ``conflicts: {mode: wait}`` in the policy the run goes on (reads run) and its first write
is held (``conflict_check``, a pre-write check of engine/execution/holds.py) at the gate that
released it, saying which workflow it waits for; the sweeper continues it once the holder lets
go (engine/sweeper.py). A write with no gate before it has nowhere to wait: refused
in wait mode too. Reads take nothing and are never held back. Datastores and networks are
places many workflows use at once (a clone onto a datastore, a VM on a port group): they are
not locked. Without dispatch (hand-back) a workflow holds its objects the same way while it
waits at a gate; once its last steps were handed out it is ``pending`` and the agent's, and
holds nothing (store/locks.py says which states hold).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.refs import is_ref
from vmware_pilot.engine.execution import holds
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.targets import named_objects
from vmware_pilot.errors import StateRefused
from vmware_pilot.policy.model import Policy
from vmware_pilot.safety.classify import Tier, classify_step
from vmware_pilot.store.locks import Holder
from vmware_pilot.store.protocol import Store

__all__ = [
    "EVENT",
    "KIND",
    "SHARED_KINDS",
    "Hold",
    "can_wait",
    "conflict_check",
    "conflicting",
    "held_refusal",
    "locked_objects",
    "object_key",
    "take",
]

KIND: Final = "conflict"
EVENT: Final = "waiting_for_object"
# Kinds many workflows use at once by design: never locked.
SHARED_KINDS: Final = frozenset({"datastore", "network"})
_KEY_MAX: Final = 255  # object_locks.object_key


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a run waits: the workflow holding one of its objects."""

    holder: Holder
    object: str

    @property
    def message(self) -> str:
        h = self.holder
        return (
            f"Waiting for workflow '{h.workflow_id}' ({h.state}, owner {h.created_by}) to let go of "
            f"{self.object}; the run goes on by itself once it ends or is cancelled"
        )


def object_key(kind: str, target: str, name: str) -> str:
    """The lock row's key of an object: ``kind|target|name`` (hashed when it is too long)."""
    key = f"{kind}|{target}|{name}"
    if len(key) <= _KEY_MAX:
        return key
    return f"{kind}|sha256:{hashlib.sha256(key.encode()).hexdigest()}"[:_KEY_MAX]


def _named(wf: Workflow, catalog: Catalog) -> list[tuple[int, str, str]]:
    """(step index, key, label) of every lockable object a write step names, in step order."""
    found: list[tuple[int, str, str]] = []
    for step in wf.steps:
        if step.is_gate or classify_step(step, catalog)[0] is Tier.READ:
            continue
        for named in named_objects(step.skill, step.tool, step.params):
            if named.kind in SHARED_KINDS or is_ref(named.name):
                continue
            where = f" on {named.target}" if named.target else ""
            key = object_key(named.kind, named.target, named.name)
            found.append((step.index, key, f"{named.kind} {named.name}{where}"))
    return found


def locked_objects(wf: Workflow, catalog: Catalog) -> dict[str, str]:
    """Key → label of every object the workflow's write steps name (steps done included: the
    workflow works on them until it ends). A name carried by a step reference is only known at
    run time: not locked."""
    return {key: label for _, key, label in reversed(_named(wf, catalog))}


def conflicting(store: Store, wf: Workflow, catalog: Catalog) -> list[dict[str, object]]:
    """The workflows holding objects ``wf``'s write steps name, one entry per object, for review
    and ``policy explain``: ``{step_index, workflow_id, state, owner, object, message}`` (the
    first write step naming it). Blocking: call it in a worker thread or a sync door."""
    named = _named(wf, catalog)
    if not named:
        return []
    first = {key: (index, label) for index, key, label in reversed(named)}
    out: list[dict[str, object]] = []
    for h in store.locks.lock_holders(wf.id, list(first)):
        index, label = first.get(h.key, (None, h.key))
        out.append(
            {
                "step_index": index,
                "workflow_id": h.workflow_id,
                "state": h.state,
                "owner": h.created_by,
                "object": label,
                "message": f"{label} is held by workflow '{h.workflow_id}' ({h.state}, owner "
                f"{h.created_by}), which writes it too",
            }
        )
    return out


def held_refusal(wf: Workflow, hold: Hold, verb: str, *, waiting: bool = False) -> StateRefused:
    """The refusal of ``verb`` (run, approve) while ``hold.holder`` holds one of the objects
    (``waiting``: the policy says wait, but no gate comes before the write to wait at)."""
    h = hold.holder
    instead = (
        "The policy says wait, but no approval gate comes before the write to wait at: add one to the plan."
        if waiting
        else "With conflicts: {mode: wait} in the policy a run waits for the object instead."
    )
    return StateRefused(
        f"Refusing to {verb} workflow '{wf.id}': {hold.object} is held by workflow '{h.workflow_id}' "
        f"({h.state}, owner {h.created_by}), which writes it too. Nothing was changed",
        hint=f"Wait until workflow '{h.workflow_id}' ends (get_workflow_status('{h.workflow_id}')) and "
        f"{verb} again, or cancel one of the two. {instead}",
        workflow_id=wf.id,
        state=wf.state.value,
        refused="object_held",
        held_by={
            "workflow_id": h.workflow_id,
            "state": h.state,
            "owner": h.created_by,
            "object": hold.object,
        },
    )


def take(store: Store, wf: Workflow, catalog: Catalog) -> Hold | None:
    """Take the workflow's objects (all or none, in one transaction): None when taken, else what
    holds one of them. Blocking: call it in a worker thread."""
    objects = locked_objects(wf, catalog)
    if not objects:
        return None  # nothing to hold: no write transaction
    holder = store.locks.take_locks(wf.id, run_key(wf.id), list(objects))
    if holder is None:
        return None
    return Hold(holder, objects.get(holder.key, holder.key))


def can_wait(wf: Workflow, catalog: Catalog) -> bool:
    """The next write the run would send has a gate before it to wait at."""
    for step in wf.steps:
        if step.status not in (StepStatus.PENDING, StepStatus.NOT_EXECUTED) or step.is_gate:
            continue
        if classify_step(step, catalog)[0] is not Tier.READ:
            return holds.releasing_gate(wf, step.index) is not None
    return True


def conflict_check(policy: Callable[[], Policy]) -> holds.PreWriteCheck:
    """With ``conflicts: {mode: wait}`` in ``policy()``: right before a write is sent, take the
    workflow's objects, or hold the write while another workflow holds one of them."""

    async def run(ctx: holds.WriteContext) -> holds.Hold | None:
        if policy().conflicts.mode != "wait":
            return None  # refused at run and approval instead (Runner.take_objects)
        runner = ctx.runner
        hold = await asyncio.to_thread(take, runner.store, ctx.wf, runner.catalog)
        if hold is None:
            return None
        h = hold.holder
        return holds.Hold(
            kind=KIND,
            event=EVENT,
            message=f"Step {ctx.index} ({ctx.step.skill}.{ctx.step.tool}) waits: {hold.message}",
            details={
                "held_by": {
                    "workflow_id": h.workflow_id,
                    "state": h.state,
                    "owner": h.created_by,
                    "object": hold.object,
                }
            },
        )

    return holds.PreWriteCheck(KIND, run)
