"""Ending a workflow otherwise than by its run: a rollback, a cancel, and the expiry of the gate
it waits at, each recorded through the runner's ``commit``/``save``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

from vmware_pilot import telemetry
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Outcome
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.execution import gate_records, undo
from vmware_pilot.results import RunResult

if TYPE_CHECKING:
    from vmware_pilot.engine.execution.parts import RunnerView

__all__ = ["EXPIRY_ACTOR", "Closer"]


class Closer:
    """Rollback (undo what ran, last first), cancel, and recording a gate's expiry
    (``engine.execution.undo`` and ``gate_records`` decide and record)."""

    def __init__(self, runner: RunnerView) -> None:
        self.runner = runner

    async def rollback(self, wf: Workflow, actor: Actor, include_unknown: bool = False) -> RunResult:
        """Undo every step Pilot recorded as success, last first; a failed undo never stops the rest
        (``engine.execution.undo`` decides and records). ``include_unknown`` (the caller acknowledged unknown
        effects) also attempts the undo of steps whose effect is unknown."""
        wf, _ = await self.runner.save(wf, functools.partial(undo.start_rollback, actor=actor))
        for index in undo.to_undo(wf, include_unknown):
            what = undo.undo_of(wf.steps[index], self.runner.catalog)
            if what == undo.SKIP:
                continue
            if isinstance(what, dict):
                wf, _ = await self.runner.save(wf, functools.partial(undo.append_result, entry=what))
                continue
            outcome = await self.runner.sender.call_step(wf, index, bound=index + 1, reverse=True)
            wf, _ = await self.runner.save(
                wf, functools.partial(undo.record_undo, index=index, outcome=outcome, actor=actor)
            )
        wf, _ = await self.runner.save(wf, functools.partial(undo.finish_rollback, actor=actor))
        bad = undo.incomplete(wf)
        if bad:
            return self.runner.answers.result(wf, actor, Outcome.FAILED, error=undo.rollback_error(bad))
        return self.runner.answers.result(wf, actor)

    def notice_expiry(self, wf: Workflow) -> Workflow:
        """Record, once, that the gate ``wf`` waits at expired (``gate_records.mark_expired``: the
        audit event ``gate_expired`` and its webhook), on the database's clock. Whichever Pilot
        notices first records it; the others find it recorded (the save is version-checked)."""
        if not gate_records.expiry_unnoticed(wf, self.runner.store.now()):
            return wf

        def change(w: Workflow) -> None:
            if not gate_records.mark_expired(w, EXPIRY_ACTOR, self.runner.store.now()):
                raise _NothingToRecord

        try:
            wf, _ = self.runner.commit(wf, change)
        except _NothingToRecord:  # another Pilot recorded it first
            return self.runner.store.workflows.load(wf.id)
        telemetry.count("gate_decisions", decision="expired")
        return wf

    def cancel(self, wf: Workflow, actor: Actor, reason: str, rejected_by: str = "") -> RunResult:
        """Move to the terminal 'cancelled' state (``engine.execution.undo.cancel``); pending steps become
        skipped and the literal secrets held for the workflow are forgotten."""
        wf, _ = self.runner.commit(
            wf, functools.partial(undo.cancel, actor=actor, reason=reason, rejected_by=rejected_by)
        )
        self.runner.vault.forget(wf.id)
        return self.runner.answers.result(wf, actor, Outcome.CANCELLED)


class _NothingToRecord(Exception):
    """A change found nothing left to record (another process recorded it): nothing is saved."""


# Who the audit trail names for what Pilot records on its own (a gate's expiry).
EXPIRY_ACTOR: Final = "vmware-pilot"
