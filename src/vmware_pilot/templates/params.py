"""Typed template parameters: the base model, binding with precise errors, the signature text, and
a built-in's parameters as ``results.TemplateParameter`` (the one description of a template's input,
built-in or custom, which ``list_workflows`` lists).

Every built-in template declares a pydantic model (unknown keys refused, strict types). ``bind``
turns a caller's ``params`` object into that model or raises ``TemplateParamError`` naming the
field, with the template's whole parameter list in the hint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
)

from vmware_pilot.errors import TemplateParamError
from vmware_pilot.results import TemplateParameter

__all__ = [
    "NonBlank",
    "SecretText",
    "Target",
    "TemplateParams",
    "bind",
    "param_error",
    "parameters_of",
    "signature",
    "type_text",
]

P = TypeVar("P", bound="TemplateParams")


class TemplateParams(BaseModel):
    """Base of every built-in's parameter model: no unknown keys, no type coercion, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value.strip()


_ENV_REF_TEXT = 'a string, or a secret reference {"$env": "VARIABLE_NAME"}'


def _secret(value: object) -> str | dict[str, str]:
    if isinstance(value, str):
        return value
    if (
        isinstance(value, dict)
        and list(value) == ["$env"]
        and isinstance(value["$env"], str)
        and value["$env"].strip()
    ):
        return {"$env": value["$env"].strip()}
    raise ValueError(f"must be {_ENV_REF_TEXT}")


NonBlank = Annotated[str, AfterValidator(_non_blank)]
"""A string that is not empty or whitespace (stored trimmed)."""

SecretText = Annotated[
    str | dict[str, str],
    PlainValidator(_secret),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {"$env": {"type": "string"}}, "required": ["$env"]},
            ]
        }
    ),
]
"""A secret given literally (redacted at rest) or as a ``{"$env": NAME}`` reference resolved at dispatch."""

Target = Annotated[
    str,
    Field(description="Target (vCenter, NSX, Aria…) each step addresses; empty uses each skill's default."),
]
"""The ``target`` every built-in copies into its steps."""


def type_text(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    """A JSON schema's type in words: ``string``, ``integer or null``, ``array of string``…"""
    ref = schema.get("$ref")
    if isinstance(ref, str) and isinstance(defs.get(ref.rsplit("/", 1)[-1]), Mapping):
        schema = defs[ref.rsplit("/", 1)[-1]]
    if "anyOf" in schema:
        return " or ".join(type_text(s, defs) for s in schema["anyOf"])
    kind = str(schema.get("type", "any"))
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"array of {type_text(schema['items'], defs)}"
    return kind


def parameters_of(model: type[TemplateParams]) -> tuple[TemplateParameter, ...]:
    """A built-in's parameters in declaration order, from its model's JSON schema (worked out
    once per model: generating the schema cost most of a ``list_workflows`` call)."""
    if model not in _PARAMETERS:
        schema = model.model_json_schema()
        defs = schema.get("$defs", {})
        required = set(schema.get("required", []))
        _PARAMETERS[model] = tuple(
            TemplateParameter.declared(
                name,
                type_text(spec, defs),
                name in required,
                str(spec.get("description", "")),
                spec.get("default"),
                name not in required,
                spec["enum"] if isinstance(spec.get("enum"), list) else None,
            )
            for name, spec in schema.get("properties", {}).items()
        )
    return _PARAMETERS[model]


_PARAMETERS: dict[type[TemplateParams], tuple[TemplateParameter, ...]] = {}


def signature(name: str, parameters: Sequence[TemplateParameter]) -> str:
    """``<name> takes a (string, required), b (integer, default 5), …`` for hints and docs."""
    return f"{name} takes " + (", ".join(p.text() for p in parameters) if parameters else "no parameters")


def _loc_text(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: Mapping[str, Any]) -> str:
    where = _loc_text(tuple(error["loc"]))
    kind = error["type"]
    if kind == "missing":
        return f"missing required parameter '{where}'"
    if kind == "extra_forbidden":
        return f"unknown parameter '{where}'"
    got = type(error.get("input")).__name__
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"parameter '{where}': {message} (got {got})"


def param_error(template: str, model: type[TemplateParams], field: str, problem: str) -> TemplateParamError:
    """A TemplateParamError for ``field`` of ``template``, its hint listing every parameter."""
    return TemplateParamError(
        f"create_workflow_from_template('{template}'): {problem}",
        field=field,
        hint=f"{signature(template, parameters_of(model))}. Fix '{field}' and call create_workflow_from_template again.",
        parameter=field,
    )


def bind(template: str, model: type[P], params: Mapping[str, Any] | None) -> P:
    """Validate ``params`` against ``model``; every problem is named, the first one is ``field``."""
    if params is not None and not isinstance(params, Mapping):
        raise param_error(template, model, "params", f"params must be an object, got {type(params).__name__}")
    try:
        return model.model_validate(dict(params or {}))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = _loc_text(tuple(errors[0]["loc"])) if errors else "params"
        problems = "; ".join(_describe(e) for e in errors)
        raise param_error(template, model, first or "params", problems) from None
