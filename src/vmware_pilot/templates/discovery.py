"""What ``list_workflows`` tells about each template's inputs: its parameters and an example call.

A parameter is ``{name, type, required, description}`` plus ``default`` when it is optional and
``enum`` when only some values are accepted. The example is the ``create_workflow_from_template``
call that plans the template: a built-in's first documented example, otherwise the required
parameters filled with placeholders of their type (the first enum value where there is one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vmware_pilot.templates.builtin.base import BuiltinTemplate
from vmware_pilot.templates.custom import CustomTemplate, placeholders_of
from vmware_pilot.templates.params import TemplateParameter, parameters_of

__all__ = ["builtin_entry", "builtin_parameters", "custom_entry", "custom_parameters", "example_call"]

_PLACEHOLDER_VALUES: dict[str, Any] = {"integer": 1, "number": 1, "boolean": True, "object": {}}


def builtin_parameters(template: BuiltinTemplate[Any]) -> list[dict[str, Any]]:
    """The parameters of a built-in, in declaration order, from its parameter model's schema."""
    return [p.entry() for p in parameters_of(template.params_model)]


def custom_parameters(template: CustomTemplate) -> list[dict[str, Any]]:
    """A YAML template's declared parameters; without a ``parameters`` block, the placeholders its
    steps use (each a required string, as a placeholder without a value is refused)."""
    if template.parameters is None:
        return [
            TemplateParameter(n, "string", True).entry() for n in sorted(placeholders_of(template.raw_steps))
        ]
    return [p.entry() for p in template.parameters.values()]


def _placeholder(param: Mapping[str, Any]) -> Any:
    if param.get("enum"):
        return param["enum"][0]
    kind = str(param["type"])
    if kind.startswith("array"):
        return []
    return _PLACEHOLDER_VALUES.get(kind, f"<{param['name']}>")


def example_call(
    name: str, parameters: Sequence[Mapping[str, Any]], examples: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The tool call that plans template ``name``: ``{tool, arguments: {workflow_type, params}}``."""
    params = (
        dict(examples[0])
        if examples
        else {str(p["name"]): _placeholder(p) for p in parameters if p["required"]}
    )
    return {
        "tool": "create_workflow_from_template",
        "arguments": {"workflow_type": name, "params": params},
    }


def builtin_entry(b: BuiltinTemplate[Any], steps: int | None) -> dict[str, Any]:
    """The ``list_workflows`` entry of a built-in (``steps``: its step count, or None)."""
    parameters = builtin_parameters(b)
    return {
        "name": b.name,
        "type": "builtin",
        "description": b.description,
        "steps": steps,
        "parameters": parameters,
        "example": example_call(b.name, parameters, b.examples),
    }


def custom_entry(t: CustomTemplate) -> dict[str, Any]:
    """The ``list_workflows`` entry of a usable custom template."""
    parameters = custom_parameters(t)
    return {
        "name": t.name,
        "description": t.description,
        "file": t.path.name,
        "steps": len(t.raw_steps),
        "type": "custom",
        "parameters": parameters,
        "example": example_call(t.name, parameters),
    }
