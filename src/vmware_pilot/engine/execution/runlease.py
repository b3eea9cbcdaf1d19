"""The run lease: which Pilot process is walking a workflow, between its steps as well as during them.

A step's lease (ownership.py) covers one call in flight and is released when its outcome is
recorded, so it cannot tell a replica that died between two steps from one that is about to take
the next. The run lease can: every run and approval takes it (row ``run:<workflow id>`` of the
same ``leases`` table, on the database's clock) before the workflow can become ``running``, renews
it while the walk goes on and releases it when the run stops at a gate, an end or a refusal. A
workflow that is ``running`` while its run lease has expired was left by a Pilot that is gone;
the sweeper (engine/execution/sweeper.py) takes the lease (exactly one process can) and continues the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from vmware_pilot.errors import PilotError, StateRefused
from vmware_pilot.ownership import new_run_owner
from vmware_pilot.store.protocol import Store

__all__ = ["Leasing", "RunLease", "holding_run", "run_key"]


class Leasing(Protocol):
    """What a run lease needs of the runner (engine/execution/runner.py): its store and lease time."""

    store: Store
    lease_seconds: float


_log = logging.getLogger(__name__)
_PREFIX = "run:"
_KEY_MAX = 64  # leases.workflow_id


def run_key(workflow_id: str) -> str:
    """The ``leases`` row of a workflow's run lease."""
    key = _PREFIX + workflow_id
    if len(key) <= _KEY_MAX:
        return key
    return _PREFIX + hashlib.sha256(workflow_id.encode()).hexdigest()[: _KEY_MAX - len(_PREFIX)]


@dataclass
class RunLease:
    """A run lease this process holds, renewed by a heartbeat task until ``release``."""

    runner: Leasing
    workflow_id: str
    owner: str
    fence: int
    _heartbeat: asyncio.Task[None] | None = None

    @classmethod
    async def take(cls, runner: Leasing, workflow_id: str) -> RunLease | None:
        """Take the run lease (free or expired) and start renewing it; None while another
        process's run holds it unexpired."""
        owner = new_run_owner()
        key = run_key(workflow_id)
        fence = await asyncio.to_thread(runner.store.acquire_lease, key, owner, runner.lease_seconds)
        if fence is None:
            return None
        held = cls(runner, workflow_id, owner, fence)
        held._heartbeat = asyncio.create_task(held._renew())
        return held

    async def _renew(self) -> None:
        key = run_key(self.workflow_id)
        seconds = self.runner.lease_seconds
        while True:
            await asyncio.sleep(seconds / 3)
            try:
                kept = await asyncio.to_thread(
                    self.runner.store.renew_lease, key, self.owner, self.fence, seconds
                )
            except PilotError as exc:  # the database is away: keep trying while the lease lasts
                _log.warning("could not renew the run lease of %s: %s", self.workflow_id, exc.message)
                continue
            if not kept:
                _log.warning("the run of %s was taken over by another Pilot process", self.workflow_id)
                return

    async def release(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        try:
            key = run_key(self.workflow_id)
            await asyncio.to_thread(self.runner.store.release_lease, key, self.owner, self.fence)
        except PilotError as exc:  # it expires on its own
            _log.warning("could not release the run lease of %s: %s", self.workflow_id, exc.message)


@contextlib.asynccontextmanager
async def holding_run(runner: Leasing, workflow_id: str, state: str) -> AsyncIterator[None]:
    """Hold ``workflow_id``'s run lease for the block; refuse (nothing changed) while another
    Pilot process's run holds it."""
    held = await RunLease.take(runner, workflow_id)
    if held is None:
        lease = await asyncio.to_thread(runner.store.lease, run_key(workflow_id))
        host, _, rest = (lease.owner if lease else "").partition("/")
        left = max(1, round(lease.remaining)) if lease else 1
        raise StateRefused(
            f"Workflow '{workflow_id}' is running in another Pilot process (pid "
            f"{rest.partition('/')[0]} on {host}). Nothing was changed",
            hint=f"Poll get_workflow_status('{workflow_id}') until that run stops, then try again. If "
            f"that process died, its run lease expires within {left} s and another Pilot continues it.",
            workflow_id=workflow_id,
            state=state,
        )
    try:
        yield
    finally:
        await held.release()
