"""What ``list_workflows`` tells about each template: its ``results.TemplateInfo``, with its
parameters and an example call.

A parameter is a ``results.TemplateParameter``. The example is the ``create_workflow_from_template``
call that plans the template: a built-in's first documented example, otherwise the required
parameters filled with placeholders of their type (the first enum value where there is one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vmware_pilot.results import TemplateExample, TemplateInfo, TemplateParameter
from vmware_pilot.templates.builtin.base import BuiltinTemplate
from vmware_pilot.templates.custom import CustomTemplate, placeholders_of
from vmware_pilot.templates.params import parameters_of

__all__ = ["builtin_entry", "custom_entry", "custom_parameters", "example_call"]

_PLACEHOLDER_VALUES: dict[str, Any] = {"integer": 1, "number": 1, "boolean": True, "object": {}}


def custom_parameters(template: CustomTemplate) -> list[TemplateParameter]:
    """A YAML template's declared parameters; without a ``parameters`` block, the placeholders its
    steps use (each a required string, as a placeholder without a value is refused)."""
    if template.parameters is None:
        return [
            TemplateParameter.declared(n, "string", True) for n in sorted(placeholders_of(template.raw_steps))
        ]
    return list(template.parameters.values())


def _placeholder(param: TemplateParameter) -> Any:
    if param.enum:
        return param.enum[0]
    if param.type.startswith("array"):
        return []
    return _PLACEHOLDER_VALUES.get(param.type, f"<{param.name}>")


def example_call(
    name: str, parameters: Sequence[TemplateParameter], examples: Sequence[Mapping[str, Any]] = ()
) -> TemplateExample:
    """The tool call that plans template ``name``: ``{tool, arguments: {workflow_type, params}}``."""
    params = dict(examples[0]) if examples else {p.name: _placeholder(p) for p in parameters if p.required}
    return TemplateExample(
        tool="create_workflow_from_template",
        arguments={"workflow_type": name, "params": params},
    )


def builtin_entry(b: BuiltinTemplate[Any], steps: int | None) -> TemplateInfo:
    """The ``list_workflows`` entry of a built-in (``steps``: its step count, left out when it
    cannot be counted: required parameters and no example)."""
    parameters = list(parameters_of(b.params_model))
    counted = {} if steps is None else {"steps": steps}
    return TemplateInfo(
        name=b.name,
        type="builtin",
        description=b.description,
        **counted,
        parameters=parameters,
        example=example_call(b.name, parameters, b.examples),
    )


def custom_entry(t: CustomTemplate) -> TemplateInfo:
    """The ``list_workflows`` entry of a usable custom template."""
    parameters = custom_parameters(t)
    return TemplateInfo(
        name=t.name,
        description=t.description,
        file=t.path.name,
        steps=len(t.raw_steps),
        type="custom",
        parameters=parameters,
        example=example_call(t.name, parameters),
    )
