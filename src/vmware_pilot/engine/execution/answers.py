"""What a run's caller is answered: the workflow and its outcome, with the steps handed out in
hand-back mode (without a dispatcher executable steps are recorded ``not_executed`` and handed
to the caller in ``pending_dispatch``; steps handed to someone else are listed under
``with_another_caller``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Outcome, StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine import handout
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.results import GateStatus, RunResult

if TYPE_CHECKING:
    from vmware_pilot.engine.execution.parts import RunnerView

__all__ = ["Answers"]

S = StepStatus

_HANDBACK_MESSAGE = (
    "Workflow NOT completed: Pilot executed nothing. Perform each step in pending_dispatch yourself, "
    "in order, with the skill's own tool. A Pilot started with --dispatch will not run steps "
    "handed out here."
)


class Answers:
    """What a run's caller is answered (the workflow, its outcome, and the steps handed out to
    the caller or to someone else), and the refusal of a hand-out to the wrong caller."""

    def __init__(self, runner: RunnerView) -> None:
        self.runner = runner

    def result(self, wf: Workflow, actor: Actor, outcome: Outcome | None = None, **extra: Any) -> RunResult:
        """WF + outcome (+ pending_dispatch and message whenever a step handed to ``actor`` is
        not_executed; steps handed to someone else are listed under ``with_another_caller``)."""
        found: dict[str, Any] = {}
        if outcome is not None:
            found["outcome"] = outcome
        mine, others = handout.pending_dispatch(self.runner.vault, wf, actor)
        if mine:
            found["pending_dispatch"] = [self._with_agent_checks(wf, entry) for entry in mine]
            found["message"] = _HANDBACK_MESSAGE
        if others:
            found["with_another_caller"] = others
        if wf.state is WorkflowState.AWAITING_APPROVAL:
            found["pending_gate"] = self._pending_gate(wf)
        return RunResult(**wf.to_dict(), **{**found, **extra})

    def _with_agent_checks(self, wf: Workflow, entry: dict[str, Any]) -> dict[str, Any]:
        """A handed-out step with, for a write, what the pre-write checks would have checked
        (``agent_checks``): without a dispatcher that is the agent's to do."""
        said = [
            c.handed_out(wf, entry["index"], self.runner.catalog) for c in self.runner.checks if c.handed_out
        ]
        return {**entry, "agent_checks": [s for s in said if s]} if any(said) else entry

    def released_result(self, wf: Workflow, agent: Actor, outcome: Outcome | None = None) -> RunResult:
        """What a person who approved at the CLI or console is shown after a run without dispatch
        handed the released steps to ``agent`` (``approval.recipient``): the steps are listed under
        ``with_another_caller`` (never as the person's own ``pending_dispatch``), ``released_to``
        names the agent, and ``message`` says what happens next."""
        mine, _ = handout.pending_dispatch(self.runner.vault, wf, agent)
        found: dict[str, Any] = {}
        if wf.state is WorkflowState.AWAITING_APPROVAL:
            found["pending_gate"] = self._pending_gate(wf)
        held = [
            {**s.ref(), "handed_to": handout.holder(wf, s)} for s in wf.steps if s.status is S.NOT_EXECUTED
        ]
        if held:
            found["with_another_caller"] = held
        if outcome is not None:
            found["outcome"] = outcome
        if not mine:
            return RunResult(**wf.to_dict(), **found)
        who = agent.label or "the agent that runs the workflow (not known to Pilot)"
        nxt = (
            "Its next run_workflow of this workflow returns them in pending_dispatch"
            if wf.state is WorkflowState.PENDING
            else "get_workflow_status shows them; the next gate waits for approval"
        )
        return RunResult(
            **wf.to_dict(),
            **found,
            released_to=agent.label,
            message=(
                f"Approved. Pilot runs nothing without dispatch: the {len(mine)} step(s) this gate "
                f"released were handed to the agent that runs workflow '{wf.id}' ({who}), not to you. "
                f"{nxt}; that agent performs them with the skills' own tools. Nothing ran yet."
            ),
        )

    def _pending_gate(self, wf: Workflow) -> GateStatus:
        """The pending gate's record as the gate view shows it (``gate_records.gate_view``)."""
        return gate_records.gate_view(
            wf, self.runner.catalog, self.runner.store.now(), self.runner.dispatcher is not None
        ).gate

    def refuse_handback(self, wf: Workflow, actor: Actor, start: int = 0) -> None:
        """Without a dispatcher: refuse, before anything changes, a walk from ``start`` that would
        hand ``actor`` steps already with another caller, or a literal secret not theirs."""
        if self.runner.dispatcher is None:
            handout.refuse_walk(wf, actor, start)
