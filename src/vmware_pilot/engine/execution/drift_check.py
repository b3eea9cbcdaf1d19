"""The drift check: right before a write step is sent, its targets are read again and compared
with what the approver was shown.

A ``PreWriteCheck`` (engine/execution/holds.py). For the write step about to be sent, the gate
that released it holds the inspection the approver saw and the prediction made from it
(engine/inspection.py, safety/predict.py). ``safety.predict.expected_before`` says which fields
the step depends on (its declared precondition, no-op test and settings, catalog/effects.json)
and what the prediction expects them to be at that point of the plan: as read at the gate, or
as an earlier released step leaves them. The step's objects are read again with the gate's own
reads (``engine.inspection.Reader``) and ``safety.predict.drifted`` compares them. When a field
differs the step is held (``drift_detected``): the run waits at the gate again, whose message
names the object, the field, what the approver saw and what it is now, with the targets and the
prediction read again for the steps still to run. A field the prediction did not know, or the
read does not give (a read that fails), is not compared: the check holds only on a difference
it can show. Reads are never checked (the runner asks only about writes). Without a dispatcher
Pilot reads nothing: the handed-out write steps say the check is the agent's (``handed_out``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.refs import resolve_refs
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.holds import Hold, PreWriteCheck, WriteContext, releasing_gate
from vmware_pilot.engine.inspection import Reader
from vmware_pilot.engine.targets import named_objects
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.predict import Drifted, depends_on, drifted, expected_before

__all__ = ["DRIFT", "DRIFT_DETECTED", "drift_check", "drift_hold", "handed_out"]

DRIFT: Final = "drift"
# The audit action and the webhook event of a drift hold.
DRIFT_DETECTED: Final = "drift_detected"
_WORDS: Final = {True: "yes", False: "no", None: "none"}


def _said(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    if isinstance(value, bool) or value is None:
        return _WORDS[value]
    return str(value) or "none"


def _when(at: str) -> str:
    return at[:19].replace("T", " ") + " UTC" if at else "at the gate"


def drift_hold(wf: Workflow, index: int, moved: list[Drifted], shown_at: str, read_at: str) -> Hold:
    """The hold for write step ``index`` whose targets moved: one sentence per field."""
    step = wf.steps[index]
    parts = []
    for d in moved:
        e = d.expected
        source = (
            f"as read at the gate, {_when(shown_at)}"
            if e.set_by is None
            else f"as step {e.set_by} ({wf.steps[e.set_by].tool}) would leave it"
        )
        parts.append(
            f"{e.label} {e.field}: the approver saw {_said(e.value)} ({source}), it is {_said(d.now)} now"
        )
    message = (
        f"DRIFT before step {index} ({step.skill}.{step.tool}), which Pilot did not call: "
        f"{'; '.join(parts)} (read {_when(read_at)}). Approve again to run it against the state as it is "
        "now (the gate shows it, and what approving is predicted to do), or reject."
    )
    return Hold(
        kind=DRIFT,
        event=DRIFT_DETECTED,
        message=message,
        details={
            "step": index,
            "changes": [d.payload() for d in moved],
            "shown_at": shown_at,
            "read_at": read_at,
        },
    )


async def _check(ctx: WriteContext) -> Hold | None:
    wf, index, runner = ctx.wf, ctx.index, ctx.runner
    if runner.dispatcher is None:
        return None
    gate = releasing_gate(wf, index)
    inspection = gate_records.inspection_of(wf, gate.index) if gate is not None else None
    prediction = gate_records.stored_prediction(wf, gate.index) if gate is not None else None
    if inspection is None or prediction is None:
        return None  # nothing was read for the approver: there is no state to compare with
    catalog = runner.catalog
    walked = [wf.steps[s.step] for s in prediction.steps if 0 <= s.step < len(wf.steps)]
    expected = expected_before(index, walked, wf.steps, inspection, catalog)
    if not expected:
        return None
    step = ctx.step
    try:
        params = resolve_refs(step.params, wf.steps, index)
    except PilotError:
        return None  # the step cannot be sent anyway; its own call says why
    keys = {e.key for e in expected}
    objects = (
        [o for o in named_objects(step.skill, step.tool, params) if o.key in keys]
        if isinstance(params, Mapping)
        else []
    )
    reader = Reader(runner)
    read_at = iso(await asyncio.to_thread(runner.store.now))
    targets = [await reader.read(o) for o in objects]
    moved = drifted(expected, targets)
    if not moved:
        return None
    return drift_hold(wf, index, moved, iso(inspection.at), read_at)


def handed_out(wf: Workflow, index: int, catalog: Catalog) -> str:
    """Beside a handed-out write step: the check Pilot would make itself with dispatch."""
    fields = depends_on(wf.steps[index], wf.steps, catalog)
    if not fields:
        return ""
    what = "; ".join(f"{label} {', '.join(names)}" for label, names in fields)
    return (
        f"Drift check (yours: Pilot runs without dispatch and reads nothing): right before this step, read "
        f"{what} again; if any differs from what the approver was shown, do not run it: show the person "
        "the change and ask again."
    )


drift_check: Final = PreWriteCheck(kind=DRIFT, run=_check, handed_out=handed_out)
