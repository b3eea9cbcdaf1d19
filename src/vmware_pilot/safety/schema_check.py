"""Checking a step against the tools its skill really offers: unknown tool names, bad params.

Used by the review when the catalog knows a skill's full tool list. Step references
(``__from_step_N__...``) and secret references (``{"$env": NAME}``) are resolved only at dispatch,
so any schema complaint about such a value (or something inside it) is dropped. Messages name
parameters and the rule they break, never the offending value, so no secret reaches a finding.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vmware_pilot.domain.refs import is_ref
from vmware_pilot.safety.redaction import is_secret_ref

if TYPE_CHECKING:
    from jsonschema import ValidationError

__all__ = ["param_problems", "suggest_tools", "tool_signature"]

_MAX_PROBLEMS = 5
_MAX_NAMES = 20


def suggest_tools(name: str, candidates: Sequence[str], n: int = 3) -> list[str]:
    """The closest tool names to ``name`` (difflib), best first."""
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)


def _is_reference(value: object) -> bool:
    return is_ref(value) or is_secret_ref(value)


def _hits_reference(params: Any, path: Sequence[Any]) -> bool:
    """True when the value at ``path`` in ``params``, or a container on the way, is a reference."""
    current = params
    if _is_reference(current):
        return True
    for part in path:
        try:
            current = current[part]
        except (KeyError, IndexError, TypeError):
            return False
        if _is_reference(current):
            return True
    return False


def _ignorable(err: ValidationError, params: Any) -> bool:
    if _hits_reference(params, list(err.absolute_path)):
        return True
    if err.validator in ("anyOf", "oneOf") and err.context:
        # The alternative holds if one branch fails only because of references.
        by_branch: dict[Any, list[ValidationError]] = defaultdict(list)
        for sub in err.context:
            by_branch[sub.relative_schema_path[0]].append(sub)
        return any(all(_ignorable(s, params) for s in subs) for subs in by_branch.values())
    return False


def _where(path: Sequence[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "params"


def _types(schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [str(k) for k in kind]
    out: list[str] = []
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            out.extend(t for t in _types(branch) if t not in out)
    return out


def _describe(err: ValidationError) -> str:
    """One problem in words, naming the parameter and the rule but never the value."""
    where = _where(list(err.absolute_path))
    rule: Any = err.validator
    value: Any = err.validator_value
    if rule == "required":
        missing = [p for p in value if isinstance(err.instance, Mapping) and p not in err.instance]
        return "missing required parameter " + ", ".join(f"'{p}'" for p in missing)
    if rule == "additionalProperties":
        allowed = set((err.schema.get("properties") or {}) if isinstance(err.schema, Mapping) else ())
        extra = (
            sorted(str(k) for k in err.instance if k not in allowed)
            if isinstance(err.instance, Mapping)
            else []
        )
        prefix = "" if where == "params" else f"{where}: "
        return prefix + "unknown parameter " + ", ".join(f"'{k}'" for k in extra)
    if rule == "type":
        kinds = [value] if isinstance(value, str) else list(value)
        return f"'{where}' must be of type {' or '.join(map(str, kinds))}"
    if rule in ("anyOf", "oneOf"):
        kinds = _types(err.schema)
        return f"'{where}' must be " + (" or ".join(kinds) if kinds else "one of the allowed shapes")
    if rule == "enum":
        return f"'{where}' must be one of {', '.join(repr(v) for v in value)}"
    if rule == "const":
        return f"'{where}' must be {value!r}"
    return f"'{where}' breaks the schema rule {rule}={value!r}"


@functools.lru_cache(maxsize=512)
def _compiled(schema_json: str) -> Any:
    # Imported at the first check, not at start-up: most sessions never check params.
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except SchemaError:
        return None  # a schema we cannot read says nothing about the params
    return cls(schema)


def param_problems(params: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Problems of ``params`` against a tool's input schema (empty when they validate)."""
    validator = _compiled(json.dumps(schema, sort_keys=True, default=str))
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(dict(params)), key=lambda e: list(map(str, e.absolute_path)))
    problems: list[str] = []
    for err in errors:
        if _ignorable(err, params):
            continue
        text = _describe(err)
        if text not in problems:
            problems.append(text)
    if len(problems) > _MAX_PROBLEMS:
        problems = [*problems[:_MAX_PROBLEMS], f"and {len(problems) - _MAX_PROBLEMS} more"]
    return problems


def tool_signature(schema: Mapping[str, Any] | None) -> str:
    """``a (required), b, c``: the parameters a tool takes, for a fix text."""
    if not schema:
        return ""
    props = list((schema.get("properties") or {}).keys())
    if not props:
        return "no parameters"
    required = set(schema.get("required") or [])
    names = [f"{p} (required)" if p in required else str(p) for p in props[:_MAX_NAMES]]
    if len(props) > _MAX_NAMES:
        names.append(f"… {len(props) - _MAX_NAMES} more")
    return ", ".join(names)
