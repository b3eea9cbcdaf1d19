"""What the runner's parts (``saving``, ``sending``, ``answers``, ``approving``, ``closing``) use
of the runner: ``RunnerView``, which ``engine.execution.runner.Runner`` is, so that no part imports
the runner (no import cycle, not even a type-only one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import Dispatcher
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.execution.holds import PreWriteCheck
from vmware_pilot.engine.execution.runlease import Leasing
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.engine.secrets import SecretVault
from vmware_pilot.errors import DispatchRefused
from vmware_pilot.policy.model import Policy
from vmware_pilot.results import RunResult
from vmware_pilot.store.leases import Fence

if TYPE_CHECKING:
    from vmware_pilot.engine.execution.answers import Answers
    from vmware_pilot.engine.execution.sending import StepSender

__all__ = ["RunnerView"]

T = TypeVar("T")


class RunnerView(Leasing, Protocol):
    """The runner as its parts see it: its dependencies, its saves, and the run's entry points."""

    dispatcher: Dispatcher | None
    vault: SecretVault
    environ: Mapping[str, str]
    checks: list[PreWriteCheck]
    policy: Callable[[], Policy]
    answers: Answers
    sender: StepSender

    @property
    def catalog(self) -> Catalog: ...

    def commit(
        self, wf: Workflow, change: Callable[[Workflow], T], fences: Sequence[Fence] = ()
    ) -> tuple[Workflow, T]: ...

    async def save(
        self,
        wf: Workflow,
        change: Callable[[Workflow], T],
        fences: Sequence[Fence] = (),
        *,
        patient: bool = False,
    ) -> tuple[Workflow, T]: ...

    async def take_step_lease(self, wf: Workflow, step: Step) -> tuple[str, int]: ...

    async def take_objects(self, wf: Workflow, verb: str) -> None: ...

    async def preflight_error(self, wf: Workflow, exclude: Sequence[int] = ()) -> DispatchRefused | None: ...

    async def run_until_checkpoint(
        self, wf: Workflow, actor: Actor, progress: ProgressFn | None = None
    ) -> RunResult: ...
