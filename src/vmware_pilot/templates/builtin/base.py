"""What a built-in template is: a name, a parameter model, a build function and example params."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from vmware_pilot.domain.enums import GATE_ACTION
from vmware_pilot.domain.model import Step
from vmware_pilot.templates.params import TemplateParams, bind, param_error
from vmware_pilot.templates.steps import step_from_dict
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = ["BuiltinTemplate", "ParamProblem", "Plan", "StepList"]

P = TypeVar("P", bound=TemplateParams)


class ParamProblem(Exception):
    """Raised by a build function for a check across fields; becomes a TemplateParamError."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(problem)
        self.field_name = field_name
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Plan:
    """The steps a template built and the workflow ``params`` it records."""

    steps: list[Step]
    params: dict[str, Any]


@dataclass(slots=True)
class StepList:
    """Appends steps with consecutive indices, each validated by ``StepInput`` like a caller's
    step (``step_from_dict``): a built-in that builds a step no door would take fails loudly."""

    steps: list[Step] = field(default_factory=list)

    def add(
        self,
        action: str,
        skill: str,
        tool: str,
        params: Mapping[str, Any],
        rollback_tool: str = "",
        rollback_params: Mapping[str, Any] | None = None,
        group_id: str = "",
    ) -> int:
        """Append a step; return its index (for ``__from_step_N__`` references)."""
        raw: dict[str, Any] = {"action": action, "skill": skill, "tool": tool, "params": dict(params)}
        if rollback_tool:
            raw["rollback_tool"] = rollback_tool
        if rollback_params:
            raw["rollback_params"] = dict(rollback_params)
        if group_id:
            raw["group_id"] = group_id
        return self._append(raw)

    def gate(self, message: str) -> int:
        return self._append(
            {"action": GATE_ACTION, "skill": "pilot", "tool": "approve", "params": {"message": message}}
        )

    def _append(self, raw: dict[str, Any]) -> int:
        index = len(self.steps)
        self.steps.append(step_from_dict(raw, index))
        return index


@dataclass(frozen=True, slots=True)
class BuiltinTemplate(Generic[P]):
    """A vetted template. ``examples`` are representative params (docs and the companion test)."""

    name: str
    description: str
    params_model: type[P]
    build: Callable[[P, ToolFacts], Plan]
    examples: tuple[dict[str, Any], ...] = ()

    def plan(self, params: Mapping[str, Any] | None, facts: ToolFacts) -> Plan:
        """Bind ``params`` (TemplateParamError naming the field) and build the steps."""
        bound = bind(self.name, self.params_model, params)
        try:
            return self.build(bound, facts)
        except ParamProblem as exc:
            raise param_error(self.name, self.params_model, exc.field_name, exc.problem) from None

    def default_step_count(self, facts: ToolFacts) -> int | None:
        """Steps built from the defaults, or from the first example when some params are required."""
        needs = any(f.is_required() for f in self.params_model.model_fields.values())
        if needs and not self.examples:
            return None
        return len(self.plan(dict(self.examples[0]) if needs else {}, facts).steps)
