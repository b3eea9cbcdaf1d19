"""Rehearsing a gate's released steps on a twin, through the real companion skills.

``Rehearser.rehearse`` finds the newest capture of the steps' target (in the Pilot home, or in
the database when one is shared: unpacked into a temporary folder, ``twin.shelf``), starts a twin
from it (``twin.simulator``, its memory bounded by ``VMWARE_PILOT_TWIN_MEMORY_MB``), puts the
state the gate just read on the objects the plan names (``twin.overlay``: power state, snapshots,
a VM's host, a host's maintenance mode), saves the twin's objects, runs the released steps in order
through a dispatcher whose skills see the twin alone (a step of a skill that cannot run on a twin,
or is not installed, is ``unknown`` with the reason, and the rehearsal goes on), stops at the
first step that fails, saves the twin's objects again and diffs them. The whole is bounded by ``VMWARE_PILOT_TWIN_TIMEOUT`` and runs one at a time per Pilot.
Whatever goes wrong, the answer is a record (``status: unknown`` with the reason), never an
exception, so the gate is still shown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from vmware_pilot.dispatch.judge import one_line
from vmware_pilot.dispatch.locate import locate
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.dispatch.stdio import DispatchOptions, StdioDispatcher
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.errors import DispatchRefused, PilotError
from vmware_pilot.twin.binaries import TwinError, available
from vmware_pilot.twin.captures import Capture, inventory_facts
from vmware_pilot.twin.overlay import OverlayOp, overlay_plan
from vmware_pilot.twin.shelf import CaptureShelf
from vmware_pilot.twin.simulator import Twin, not_on_a_twin, start_twin

__all__ = ["ParamsFor", "Rehearser", "TwinSettings", "rehearsal_digest"]

# A released step's params for the rehearsal (references resolved against the steps so far, the
# rehearsed ones carrying their twin answers), or why it cannot be rehearsed.
ParamsFor = Callable[[Step, Sequence[Step]], dict[str, Any] | str]
_FACT_FIELDS: Final = (
    "power_state",
    "tools_status",
    "snapshots",
    "host",
    "maintenance_mode",
    "connection_state",
)


@dataclass(frozen=True)
class TwinSettings:
    mode: Literal["auto", "off", "required"] = "auto"
    home: Path = Path("~/.vmware")
    vcsim: str = ""
    govc: str = ""
    timeout: float = 120.0
    max_age_hours: float = 24.0
    memory_mb: int = 2048
    skill_commands: Mapping[str, str] = dataclasses.field(default_factory=dict)


def rehearsal_digest(record: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` over what a rehearsal found: the capture's digest, what was put on the twin
    (the overlay), each step's outcome and answer, and the diff (not its time or duration)."""
    body = {
        "capture": (record.get("capture") or {}).get("digest", ""),
        "overlay": record.get("overlay") or [],
        "status": record.get("status"),
        "reason": record.get("reason", ""),
        "steps": [[s.get("step"), s.get("outcome"), s.get("answer")] for s in record.get("steps") or []],
        "diff": record.get("diff") or [],
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _answer(outcome: StepOutcome) -> str:
    payload = outcome.payload
    if isinstance(payload, Mapping) and payload.get("error"):
        return one_line(payload["error"])
    if outcome.message:
        return one_line(outcome.message)
    if isinstance(payload, Mapping):
        for key in ("result", "message", "action", "status"):
            if payload.get(key):
                return one_line(payload[key])
    return one_line(json.dumps(payload, default=str)) if payload is not None else "no answer"


def _label(entry: Mapping[str, Any]) -> str:
    kind = {
        "VirtualMachine": "",
        "HostSystem": "host ",
        "Datastore": "datastore ",
        "ClusterComputeResource": "cluster ",
    }
    return (
        f"{kind.get(str(entry.get('type')), str(entry.get('type', '')).lower() + ' ')}{entry.get('name', '')}"
    )


def _diff(
    before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ref in sorted(set(before) | set(after)):
        old, new = before.get(ref), after.get(ref)
        if old is None or new is None:
            entry = old or new or {}
            if entry.get("type") in ("Task", "Event"):
                continue
            out.append(
                {
                    "object": _label(entry),
                    "field": "exists",
                    "before": old is not None,
                    "after": new is not None,
                }
            )
            continue
        for name in _FACT_FIELDS:
            if old.get(name) != new.get(name):
                out.append(
                    {"object": _label(new), "field": name, "before": old.get(name), "after": new.get(name)}
                )
    return out


class Rehearser:
    """Rehearses gates on twins (one rehearsal at a time in this process), from the captures of
    ``shelf`` (default: those in ``settings.home``)."""

    def __init__(self, settings: TwinSettings, shelf: CaptureShelf | None = None) -> None:
        self.settings = settings
        self.shelf = shelf if shelf is not None else CaptureShelf(settings.home.expanduser())
        self._busy: asyncio.Lock | None = None

    def _target(self, steps: Sequence[Step]) -> tuple[str, str]:
        """The one target the steps name (empty: the only captured one), or why there is none."""
        named = {
            str(s.params.get("target") or "") for s in steps if isinstance(s.params.get("target", ""), str)
        }
        named.discard("")
        if len(named) > 1:
            return (
                "",
                f"the steps name several targets ({', '.join(sorted(named))}); a twin is of one vCenter",
            )
        if named:
            return named.pop(), ""
        captured = {c.target for c in self.shelf.list()}
        if len(captured) == 1:
            return captured.pop(), ""
        return "", "the steps name no target and the captures are of several" if captured else "no capture"

    def plan(self, steps: Sequence[Step]) -> tuple[Capture | None, str]:
        """The capture a rehearsal of ``steps`` would use, or why none would run ("" with None: off)."""
        if self.settings.mode == "off":
            return None, ""
        target, why = self._target(steps)
        capture = self.shelf.latest(target) if target else None
        if capture is None:
            why = (
                why
                if not target
                else f"no capture of target '{target}' (`vmware-pilot twin capture {target}`)"
            )
        elif not available("vcsim", self.settings.vcsim) or not available("govc", self.settings.govc):
            capture, why = None, "no simulator found (VMWARE_PILOT_TWIN_VCSIM / VMWARE_PILOT_TWIN_GOVC)"
        if capture is None and self.settings.mode == "auto":
            return None, ""
        return capture, why

    def _capture_view(self, capture: Capture) -> dict[str, Any]:
        age = capture.age_seconds()
        return {
            **capture.public(),
            "age_hours": round(age / 3600, 2),
            "stale": age > self.settings.max_age_hours * 3600,
        }

    async def rehearse(
        self,
        released: Sequence[Step],
        steps: Sequence[Step],
        reads: Mapping[str, Any],
        params_for: ParamsFor,
    ) -> dict[str, Any] | None:
        """The rehearsal record of ``released`` (None: no rehearsal wanted). ``reads``: what the
        gate just read (its inspection's ``targets`` and ``previews``), put on the twin first."""
        try:
            capture, why = await asyncio.to_thread(self.plan, released)  # the database may be asked
        except PilotError as exc:  # the captures cannot be read (the database is unavailable)
            capture, why = None, f"the captures cannot be read: {one_line(exc.message)}"
        if capture is None and not why:
            return None
        began = time.monotonic()
        record: dict[str, Any] = {"status": "unknown", "reason": why, "verdict": "unknown"}
        if capture is not None:
            record["capture"] = self._capture_view(capture)
            if self._busy is None:
                self._busy = asyncio.Lock()
            try:
                async with self._busy:
                    await asyncio.wait_for(
                        self._run(capture, released, steps, reads, params_for, record), self.settings.timeout
                    )
            except TimeoutError:
                record.update(
                    status="unknown",
                    verdict="unknown",
                    reason=f"the rehearsal took longer than VMWARE_PILOT_TWIN_TIMEOUT ({self.settings.timeout:g} s)",
                )
            except (PilotError, DispatchRefused, OSError) as exc:
                message = exc.message if isinstance(exc, (PilotError, DispatchRefused)) else str(exc)
                record.update(
                    status="unknown", verdict="unknown", reason=f"the twin could not run: {one_line(message)}"
                )
        record["seconds"] = round(time.monotonic() - began, 2)
        record["digest"] = rehearsal_digest(record)
        return record

    async def _save(self, twin: Twin, into: Path) -> dict[str, dict[str, Any]]:
        await twin.govc("object.save", "-d", str(into))
        return await asyncio.to_thread(inventory_facts, into)

    async def _run(
        self,
        capture: Capture,
        released: Sequence[Step],
        steps: Sequence[Step],
        reads: Mapping[str, Any],
        params_for: ParamsFor,
        record: dict[str, Any],
    ) -> None:
        unpacked = Path(tempfile.mkdtemp(prefix="pilot-twin-capture-"))
        try:
            # A capture kept in the database is unpacked into a temporary folder and checked.
            loadable = await asyncio.to_thread(self.shelf.materialise, capture, unpacked)
            twin = await start_twin(
                loadable,
                vcsim=self.settings.vcsim,
                govc=self.settings.govc,
                memory_mb=self.settings.memory_mb,
            )
            try:
                # The overlay is planned against the capture's objects: what the twin starts with.
                captured = await asyncio.to_thread(inventory_facts, loadable.objects_dir)
                targets = [t for t in reads.get("targets") or [] if isinstance(t, Mapping)]
                previews = reads.get("previews")
                overlay = overlay_plan(targets, previews if isinstance(previews, Mapping) else {}, captured)
                await self._on_twin(twin, released, steps, overlay, params_for, record)
            except (PilotError, DispatchRefused, OSError):
                if twin.stopped():  # what failed did so because the simulator stopped: say that
                    raise TwinError(twin.stopped()) from None
                raise
            finally:
                await twin.stop()
        finally:
            shutil.rmtree(unpacked, ignore_errors=True)

    async def _on_twin(
        self,
        twin: Twin,
        released: Sequence[Step],
        steps: Sequence[Step],
        overlay: Sequence[OverlayOp],
        params_for: ParamsFor,
        record: dict[str, Any],
    ) -> None:
        scratch = Path(tempfile.mkdtemp(prefix="pilot-twin-diff-"))
        dispatcher = StdioDispatcher(
            DispatchOptions(
                call_timeout=self.settings.timeout,
                start_timeout=self.settings.timeout,
                per_call=True,
                overrides=self.settings.skill_commands,
            ),
            env=twin.skill_env(os.environ),
        )
        try:
            for op in overlay:
                await twin.govc(*op.args)
            record["overlay"] = [op.says for op in overlay]
            before = await self._save(twin, scratch / "before")
            local = list(steps)
            rehearsed: list[dict[str, Any]] = []
            stopped = False
            for step in released:
                entry: dict[str, Any] = {"step": step.index, "skill": step.skill, "tool": step.tool}
                if stopped:
                    rehearsed.append({**entry, "outcome": "not_reached", "answer": ""})
                    continue
                elsewhere = self._cannot_run(step.skill)
                if elsewhere:  # said, and the steps after it are still rehearsed
                    rehearsed.append({**entry, "outcome": "unknown", "answer": elsewhere})
                    continue
                params = params_for(step, local)
                if isinstance(params, str):
                    rehearsed.append({**entry, "outcome": "not_rehearsed", "answer": params})
                    stopped = True
                    continue
                outcome = await self._call(dispatcher, step, params)
                ok = outcome.kind is OutcomeKind.SUCCEEDED
                refused = (
                    not ok
                    and isinstance(outcome.payload, Mapping)
                    and "refused" in str(outcome.payload.get("error", ""))
                )
                rehearsed.append(
                    {
                        **entry,
                        "outcome": "succeeds" if ok else "refused" if refused else "fails",
                        "answer": _answer(outcome),
                    }
                )
                if twin.stopped():  # the step's answer is the simulator's end, not the skill's
                    raise TwinError(twin.stopped())
                local[step.index] = dataclasses.replace(
                    step, status=StepStatus.SUCCESS if ok else StepStatus.FAILED, result=outcome.payload
                )
                stopped = not ok
            after = await self._save(twin, scratch / "after")
            failed = next((s for s in rehearsed if s["outcome"] in ("refused", "fails")), None)
            partial = next((s for s in rehearsed if s["outcome"] in ("unknown", "not_rehearsed")), None)
            record.update(
                status="rehearsed",
                reason=""
                if partial is None
                else f"step {partial['step']} not rehearsed: {partial['answer']}",
                verdict="fails" if failed else "unknown" if partial else "succeeds",
                steps=rehearsed,
                diff=_diff(before, after),
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _cannot_run(self, skill: str) -> str:
        """Why ``skill``'s steps cannot run on a twin ("" when they can)."""
        why = not_on_a_twin(skill)
        if why:
            return why
        try:
            locate(skill, self.settings.skill_commands)
        except DispatchRefused as exc:
            return f"vmware-{skill} runs on a twin but is not installed here: {one_line(exc.message)}"
        return ""

    @staticmethod
    async def _call(dispatcher: StdioDispatcher, step: Step, params: dict[str, Any]) -> StepOutcome:
        call: Awaitable[StepOutcome] = dispatcher.call(step.skill, step.tool, params)
        try:
            return await call
        except (PilotError, DispatchRefused) as exc:
            return StepOutcome(OutcomeKind.FAILED, None, exc.message)
