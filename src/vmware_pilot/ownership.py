"""Which Pilot run holds a workflow's in-flight steps: run leases, not process ids.

A run takes the workflow's lease (store/leases.py) before it marks a step ``running`` and keeps
it renewed while the call is in flight; the workflow records the lease's owner (``Workflow.run_owner``) for status views.
Another process (a replica on any host, in any PID namespace, or the operator CLI) may treat a
``running`` step as a crash's leftover only once that lease has expired on the database's clock:
taking the lease then bumps its fence, so the old run writes nothing more for the step.
"""

from __future__ import annotations

import os
import socket
import uuid

from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import RunOwner
from vmware_pilot.errors import StateRefused
from vmware_pilot.store.leases import Lease

__all__ = [
    "new_run_owner",
    "owner_is_this_process",
    "refuse_held",
    "this_process",
]


def this_process(owner: str) -> RunOwner:
    """The run owner ``owner`` (a lease owner, ``new_run_owner``) in this process, for status views."""
    return RunOwner(host=socket.gethostname(), pid=os.getpid(), owner=owner)


def new_run_owner() -> str:
    """A lease owner unique to one run: host, pid and a random part (pids repeat across hosts,
    containers and restarts; the random part never does)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"


def owner_is_this_process(owner: str) -> bool:
    """Whether lease ``owner`` (``new_run_owner``'s form) names this process."""
    host, _, rest = owner.partition("/")
    return host == socket.gethostname() and rest.partition("/")[0] == str(os.getpid())


def refuse_held(wf: Workflow, step: Step, lease: Lease | None) -> None:
    """Refuse (changing nothing) while ``step``, found ``running``, is under another run's live lease.

    Without a lease, or with an expired one, the step is a crash's leftover and the caller goes on.
    """
    if lease is None or lease.expired:
        return
    host, _, rest = lease.owner.partition("/")
    where = (
        "another run in this Pilot process"
        if owner_is_this_process(lease.owner)
        else f"another Pilot process (pid {rest.partition('/')[0]} on {host})"
    )
    raise StateRefused(
        f"Workflow '{wf.id}' is running in {where}: step "
        f"{step.index} ({step.skill}.{step.tool}) has been in flight since {iso(step.started_at)}. "
        f"Nothing was changed",
        hint=f"Poll get_workflow_status('{wf.id}') until that run stops, then try again. If that "
        f"process died, its lease expires within {max(1, round(lease.remaining))} s.",
        workflow_id=wf.id,
        state=wf.state.value,
    )
