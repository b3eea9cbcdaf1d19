"""Custom YAML templates: load, check, bind parameters, render steps.

See docs/contract.md#custom-yaml-templates.

A file is ``*.yaml`` or ``*.yml`` in the templates folder (or a row of the database), checked
once per change of its text (``templates/registry.py`` keeps what was checked by digest). Format::

    name: restart_web            # required; not a built-in name
    description: Restart the web tier
    authors: [alice]             # optional; added to each workflow's authors
    parameters:                  # optional; when present, only these may be passed
      vm_name: {type: string, required: true, description: VM to restart}
      force: {type: boolean, default: false}
      mode: {type: string, enum: [soft, hard], default: soft}   # enum: the only values accepted
    steps:                       # required, non-empty; step keys as for create_workflow
      - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: "{{vm_name}}", force: "{{force}}"}}

``{{name}}`` placeholders are replaced everywhere in a step. In ``params``/``rollback_params`` one
that is the whole string keeps the parameter's type, one inside a longer string is written as
text; in ``action``, ``skill``, ``tool``, ``rollback_tool`` and ``group_id`` it is always text. A
placeholder without a value is an error, never left in place.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vmware_pilot.domain.model import Step
from vmware_pilot.errors import InvalidInput, StepValidationError, TemplateError, TemplateParamError
from vmware_pilot.results import TemplateParameter
from vmware_pilot.safety.redaction import MASK, is_secret_key, is_secret_ref, redact_text
from vmware_pilot.templates.params import signature
from vmware_pilot.templates.steps import IDENTIFIER_KEYS, steps_from_dicts

__all__ = [
    "MAX_SAVED_BYTES",
    "PARAM_TYPES",
    "BrokenFile",
    "CustomTemplate",
    "check_text",
    "digest_of",
    "literal_secrets",
    "load_file",
    "load_text",
    "masked_document",
    "name_problem",
    "placeholders_of",
    "read_text",
    "template_files",
]

_log = logging.getLogger(__name__)
MAX_FILE_BYTES = 1 << 20
# What Pilot itself writes or takes in as a template (a save through MCP, `templates import`):
# the text is parsed by every Pilot that lists it, once per change, so it is kept small.
MAX_SAVED_BYTES = 256 << 10
TOP_KEYS = ("name", "description", "authors", "parameters", "steps")
SPEC_KEYS = ("type", "default", "required", "description", "enum")
PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}
_TEXT_KEYS = ("action", "skill", "tool", "rollback_tool", "group_id")
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_PARAM_NAME = re.compile(r"[A-Za-z]\w*")


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a template file (None when it can)."""
    if not isinstance(name, str):
        return "the name must be text" if name is not None else "the name is missing"
    if not name.strip():
        return "the name is empty"
    if name != name.strip():
        return "the name has leading or trailing spaces"
    if "/" in name or "\\" in name:
        return "the name contains '/' or '\\'"
    if name.startswith("."):
        return "the name starts with '.'"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "the name contains a control character"
    if len(name) > 100:
        return "the name is longer than 100 characters"
    return None


def _is_type(value: object, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, PARAM_TYPES[kind])


@dataclass(frozen=True, slots=True)
class BrokenFile:
    """A file in the templates folder that cannot be used, and why."""

    path: Path
    name: str
    error: str


@dataclass(frozen=True, slots=True)
class CustomTemplate:
    name: str
    description: str
    path: Path
    raw_steps: tuple[dict[str, Any], ...]
    parameters: dict[str, TemplateParameter] | None
    authors: tuple[str, ...]

    def signature(self) -> str:
        if self.parameters is None:
            used = sorted({n for s in self.raw_steps for n in _placeholders(s)})
            return f"{self.name} has no parameters block; its steps use " + (
                ", ".join(used) if used else "no parameters"
            )
        return signature(self.name, list(self.parameters.values()))

    def bind(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check ``given`` against the parameters block; the values with defaults applied."""
        if given is not None and not isinstance(given, Mapping):
            raise self._param_error("params", f"params must be an object, got {type(given).__name__}")
        values = dict(given or {})
        if self.parameters is None:
            return values
        for key in values:
            if key not in self.parameters:
                raise self._param_error(key, f"unknown parameter '{key}'")
        for spec in self.parameters.values():
            if spec.name in values:
                if not _is_type(values[spec.name], spec.type):
                    got = type(values[spec.name]).__name__
                    raise self._param_error(
                        spec.name, f"parameter '{spec.name}' must be {spec.type}, got {got}"
                    )
                if spec.enum and values[spec.name] not in spec.enum:
                    allowed = ", ".join(map(repr, spec.enum))
                    raise self._param_error(
                        spec.name,
                        f"parameter '{spec.name}' must be one of {allowed}, got {values[spec.name]!r}",
                    )
            elif spec.has_default:  # a copy: the template is kept, checked, across calls
                values[spec.name] = copy.deepcopy(spec.default)
            elif spec.required:
                raise self._param_error(spec.name, f"missing required parameter '{spec.name}'")
        return values

    def recorded(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` as the workflow's params record them: a parameter that fills a secret key
        (``password: "{{admin_pass}}"``) is masked, as its own name may not look secret."""
        hidden: set[str] = set()
        for raw in self.raw_steps:
            for key in ("params", "rollback_params"):
                hidden |= _secret_placeholders(raw.get(key), under_secret=False)
        return {
            k: MASK if k in hidden and not (v in (None, "") or isinstance(v, bool) or is_secret_ref(v)) else v
            for k, v in values.items()
        }

    def render(self, values: Mapping[str, Any]) -> list[Step]:
        """The steps with every placeholder replaced (TemplateParamError when one has no value)."""
        out = []
        for i, raw in enumerate(self.raw_steps):
            step = copy.deepcopy(raw)  # the template is kept, checked, across calls: never shared
            for key in ("params", "rollback_params"):
                if isinstance(step.get(key), Mapping):
                    step[key] = self._fill(step[key], values, f"step {i} {key}")
            # Names and labels are text: a placeholder there is always written as text.
            for key in _TEXT_KEYS:
                if isinstance(step.get(key), str):
                    filled = self._fill(step[key], values, f"step {i} {key}")
                    step[key] = filled if isinstance(filled, str) else _as_text(filled)
            out.append(step)
        return steps_from_dicts(out)

    def _fill(self, value: Any, values: Mapping[str, Any], where: str) -> Any:
        if isinstance(value, Mapping):
            return {k: self._fill(v, values, where) for k, v in value.items()}
        if isinstance(value, list):
            return [self._fill(v, values, where) for v in value]
        if not isinstance(value, str):
            return value
        for name in _PLACEHOLDER.findall(value):
            if name not in values:
                raise self._param_error(
                    name, f"{where} uses {{{{{name}}}}} but no value for '{name}' was given"
                )
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: _as_text(values[m.group(1)]), value)

    def _param_error(self, field: str, problem: str) -> TemplateParamError:
        return TemplateParamError(
            f"create_workflow_from_template('{self.name}'): {problem}",
            field=field,
            hint=f"{self.signature()} (defined in {self.path.name}). Fix '{field}' and call "
            "create_workflow_from_template again.",
            parameter=field,
        )


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | dict | list) or value is None:
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, Mapping):
        return set().union(*(_placeholders(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_placeholders(v) for v in value)) if value else set()
    return set(_PLACEHOLDER.findall(value)) if isinstance(value, str) else set()


def placeholders_of(steps: Sequence[Mapping[str, Any]]) -> set[str]:
    """Every ``{{name}}`` the raw steps use."""
    return set().union(*(_placeholders(s) for s in steps)) if steps else set()


def _secret_placeholders(value: Any, *, under_secret: bool) -> set[str]:
    """Placeholder names used anywhere under a secret key of ``value``."""
    if isinstance(value, Mapping):
        found: set[str] = set()
        for k, v in value.items():
            found |= _secret_placeholders(v, under_secret=under_secret or is_secret_key(str(k)))
        return found
    if isinstance(value, list):
        return set().union(*(_secret_placeholders(v, under_secret=under_secret) for v in value))
    if under_secret and isinstance(value, str):
        return set(_PLACEHOLDER.findall(value))
    return set()


def _with_sample_names(step: Any) -> Any:
    """``step`` with each placeholder in a name replaced by a sample name, to check its shape now;
    the filled-in name is checked again when the template is used."""
    if not isinstance(step, Mapping):
        return step
    return {
        k: _PLACEHOLDER.sub("x", v) if k in IDENTIFIER_KEYS and isinstance(v, str) else v
        for k, v in step.items()
    }


def _parameters(raw: Any) -> dict[str, TemplateParameter]:
    if not isinstance(raw, Mapping):
        raise ValueError("'parameters' must be a mapping of parameter name to its spec")
    out: dict[str, TemplateParameter] = {}
    for name, given in raw.items():
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
            raise ValueError(f"parameter name {name!r} must be a word starting with a letter")
        spec = {} if given is None else given
        if not isinstance(spec, Mapping):
            raise ValueError(f"parameter '{name}': its spec must be a mapping ({', '.join(SPEC_KEYS)})")
        unknown = sorted(str(k) for k in spec if k not in SPEC_KEYS)
        if unknown:
            raise ValueError(
                f"parameter '{name}': unknown key(s) {', '.join(unknown)}; allowed: {', '.join(SPEC_KEYS)}"
            )
        kind = spec.get("type", "string")
        if kind not in PARAM_TYPES:
            raise ValueError(f"parameter '{name}': type {kind!r} is not one of {', '.join(PARAM_TYPES)}")
        has_default = "default" in spec
        if has_default and not _is_type(spec["default"], kind):
            raise ValueError(f"parameter '{name}': default {spec['default']!r} is not of type {kind}")
        required = spec.get("required", not has_default)
        if not isinstance(required, bool):
            raise ValueError(f"parameter '{name}': required must be true or false")
        if required and has_default:
            raise ValueError(f"parameter '{name}': has a default, so it cannot be required")
        description = spec.get("description", "")
        if not isinstance(description, str):
            raise ValueError(f"parameter '{name}': description must be text")
        enum = _enum(name, spec, kind)
        if enum is not None and has_default and spec["default"] not in enum:
            raise ValueError(f"parameter '{name}': default {spec['default']!r} is not one of its enum values")
        out[name] = TemplateParameter.declared(
            name, kind, required, description, spec.get("default"), has_default, enum
        )
    return out


_MAX_ERROR = 300


def _inside(path: Path) -> Path:
    """The file ``path`` names, refusing a link that leads out of its folder or to no regular file."""
    target = path.resolve()
    if path.is_symlink():
        try:
            target.relative_to(path.parent.resolve())
        except ValueError:
            raise ValueError(
                "it is a symbolic link to a file outside the templates folder, which is never read"
            ) from None
    if not target.is_file():
        raise ValueError("it is not a regular file")
    return target


def _read(path: Path) -> Any:
    """The YAML data of one file in the templates folder (ValueError/OSError/UnicodeDecodeError)."""
    target = _inside(path)
    if target.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    from vmware_pilot.templates.yamlsafe import load_yaml  # YAML only when there is a file to read

    return load_yaml(target.read_text(encoding="utf-8"))


def _bounded(message: str) -> str:
    return message if len(message) <= _MAX_ERROR else message[: _MAX_ERROR - 1] + "…"


def _enum(name: str, spec: Mapping[str, Any], kind: str) -> tuple[Any, ...] | None:
    """The ``enum`` values of a parameter spec (None without one): a non-empty list of its type."""
    if "enum" not in spec:
        return None
    values = spec["enum"]
    if not isinstance(values, list) or not values or not all(_is_type(v, kind) for v in values):
        raise ValueError(f"parameter '{name}': enum must be a non-empty list of {kind} values")
    return tuple(values)


def load_file(path: Path, builtin_names: Collection[str]) -> CustomTemplate:
    """Parse and check one file; TemplateError whose message says what is wrong where.

    The message never quotes YAML it could not read (a link may lead to someone else's file) and
    is at most a few hundred characters."""
    return _checked(lambda: _read(path), path, builtin_names)


def _parse_text(text: str) -> Any:
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise ValueError(f"the template is larger than {MAX_FILE_BYTES} bytes")
    from vmware_pilot.templates.yamlsafe import load_yaml

    return load_yaml(text)


def load_text(text: str, path: Path, builtin_names: Collection[str]) -> CustomTemplate:
    """Check the YAML ``text`` of a stored template exactly as ``load_file`` checks a file's;
    ``path`` (``<name>.yaml``) names it in messages and in the result."""
    return _checked(lambda: _parse_text(text), path, builtin_names)


def read_text(path: Path) -> str:
    """The text of one file of a templates folder, with ``load_file``'s refusals (link out of the
    folder, not a regular file, too large) as TemplateError."""
    try:
        target = _inside(path)
        if target.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"the file is larger than {MAX_FILE_BYTES} bytes")
        return target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TemplateError(f"{path.name}: the file is not UTF-8 text") from None
    except OSError as exc:
        raise TemplateError(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except ValueError as exc:
        raise TemplateError(_bounded(f"{path.name}: {exc}")) from None


def digest_of(text: str) -> str:
    """The SHA-256 (hex) of a template's text as UTF-8: what a checked template is kept under."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_text(text: str, path: Path, builtin_names: Collection[str]) -> CustomTemplate | BrokenFile:
    """Parse and check ``text`` once: the template, or why it cannot be used (a ``BrokenFile``
    named by the ``name`` its text declares when that can be read, else by the file stem).

    Never raises for what the text holds: one template never breaks a listing for everyone."""
    docs: list[Any] = []

    def parse() -> Any:
        docs.append(_parse_text(text))
        return docs[0]

    try:
        return _checked(parse, path, builtin_names)
    except TemplateError as exc:
        return BrokenFile(path, _declared_name(docs[0], path) if docs else path.stem, exc.message)
    except Exception as exc:
        _log.exception("template %s could not be checked", path.name)
        return BrokenFile(path, path.stem, f"{path.name}: cannot be used ({type(exc).__name__})")


def _declared_name(doc: Any, path: Path) -> str:
    name = doc.get("name") if isinstance(doc, Mapping) else None
    return name if isinstance(name, str) and not name_problem(name) else path.stem


def excerpt_name(name: str) -> str:
    return name if len(name) <= 100 else name[:99] + "…"


def literal_secrets(tpl: CustomTemplate) -> list[str]:
    """Where a template holds a secret in clear: a value under a secret key that is neither
    empty, masked, a ``{"$env": …}`` reference nor only ``{{placeholders}}`` (``step N
    params.key``); a secret shape in any text (``password=…``, ``Bearer …``, ``user:pw@`` in a
    URL: ``step N tool``, ``description``); the default or enum values of a parameter whose name
    is secret, or a text secret in a parameter's default or description (``parameters.pw.default``)."""
    found: list[str] = []
    if _text_secret(tpl.description):
        found.append("description")
    for i, raw in enumerate(tpl.raw_steps):
        for key, value in raw.items():
            _clear_secrets(value, f"step {i} {key}", under_secret=False, found=found)
    for spec in (tpl.parameters or {}).values():
        secret = is_secret_key(spec.name)
        where = f"parameters.{spec.name}"
        if spec.has_default:
            _clear_secrets(spec.default, f"{where}.default", under_secret=secret, found=found)
        for n, value in enumerate(spec.enum or ()):
            _clear_secrets(value, f"{where}.enum[{n}]", under_secret=secret, found=found)
        if _text_secret(spec.description):
            found.append(f"{where}.description")
    return found


def _text_secret(text: str) -> bool:
    """True when ``text`` holds a secret shape in clear (a ``{{placeholder}}`` is not one)."""
    probe = _PLACEHOLDER.sub(MASK, text)
    return redact_text(probe) != probe


def _clear_secrets(value: Any, where: str, *, under_secret: bool, found: list[str]) -> None:
    if is_secret_ref(value):
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            _clear_secrets(v, f"{where}.{k}", under_secret=under_secret or is_secret_key(str(k)), found=found)
        return
    if isinstance(value, list):
        for n, v in enumerate(value):
            _clear_secrets(v, f"{where}[{n}]", under_secret=under_secret, found=found)
        return
    if not under_secret:
        if isinstance(value, str) and _text_secret(value):
            found.append(where)
        return
    if value is None or value == "" or isinstance(value, bool) or value == MASK:
        return
    if isinstance(value, str) and not _PLACEHOLDER.sub("", value).strip():
        return
    found.append(where)


def masked_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A template document with every secret ``literal_secrets`` finds replaced by ``***``
    (``{{placeholders}}`` and ``{"$env": …}`` kept): what an export writes for a template that
    holds one. A masked default that was not text is dropped (``***`` would not be of its type)."""
    out = dict(doc)
    if isinstance(out.get("description"), str):
        out["description"] = _masked_text(out["description"])
    if isinstance(out.get("steps"), list):
        out["steps"] = [_masked(step, under_secret=False) for step in out["steps"]]
    params = out.get("parameters")
    if isinstance(params, Mapping):
        out["parameters"] = {k: _masked_spec(str(k), spec) for k, spec in params.items()}
    return out


def _masked_text(text: str) -> str:
    return redact_text(text) if _text_secret(text) else text


def _masked(value: Any, *, under_secret: bool) -> Any:
    if is_secret_ref(value):
        return value
    if isinstance(value, Mapping):
        return {k: _masked(v, under_secret=under_secret or is_secret_key(str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, under_secret=under_secret) for v in value]
    if not under_secret:
        return _masked_text(value) if isinstance(value, str) else value
    if value is None or value == "" or isinstance(value, bool) or value == MASK:
        return value
    if isinstance(value, str) and not _PLACEHOLDER.sub("", value).strip():
        return value
    return MASK


def _masked_spec(name: str, spec: Any) -> Any:
    if not isinstance(spec, Mapping):
        return spec
    out = dict(spec)
    secret = is_secret_key(name)
    if "default" in out:
        masked = _masked(out["default"], under_secret=secret)
        if masked == MASK and not isinstance(out["default"], str):
            del out["default"]
        else:
            out["default"] = masked
    if "enum" in out:
        if secret:  # the values of a secret are secrets: the parameter takes any value of its type
            del out["enum"]
        else:
            out["enum"] = _masked(out["enum"], under_secret=False)
    if isinstance(out.get("description"), str):
        out["description"] = _masked_text(out["description"])
    return out


def _checked(read: Callable[[], Any], path: Path, builtin_names: Collection[str]) -> CustomTemplate:
    try:
        return _template(read(), path, builtin_names)
    except UnicodeDecodeError:
        raise TemplateError(f"{path.name}: the file is not UTF-8 text") from None
    except OSError as exc:
        raise TemplateError(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except (ValueError, StepValidationError, InvalidInput) as exc:
        message = exc.message if isinstance(exc, InvalidInput) else str(exc)
        raise TemplateError(_bounded(f"{path.name}: {message}")) from None
    except RecursionError:
        raise TemplateError(f"{path.name}: the file nests too deeply to be read") from None


def _template(doc: Any, path: Path, builtin_names: Collection[str]) -> CustomTemplate:
    if not isinstance(doc, Mapping):
        raise ValueError("the file must be a mapping with at least 'name' and 'steps'")
    unknown = sorted(str(k) for k in doc if k not in TOP_KEYS)
    if unknown:
        raise ValueError(f"unknown top-level key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_KEYS)}")
    name = doc.get("name")
    problem = name_problem(name)
    if problem or not isinstance(name, str):
        raise ValueError(f"'name' is not usable: {problem}")
    if name in builtin_names:
        raise ValueError(
            f"the name '{name}' is a built-in template name and cannot be reused; rename the template "
            f"(for example to '{name}_custom')"
        )
    description = doc.get("description") or ""
    if not isinstance(description, str):
        raise ValueError("'description' must be text")
    authors = doc.get("authors") or []
    if not isinstance(authors, list) or any(isinstance(a, dict | list) for a in authors):
        raise ValueError("'authors' must be a list of names")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ValueError("'steps' must be a non-empty list of steps")
    # the structure is checked now (names with sample values), placeholders on use
    steps_from_dicts([_with_sample_names(s) for s in steps], template=True)
    parameters = _parameters(doc["parameters"]) if doc.get("parameters") is not None else None
    if parameters is not None:
        undeclared = sorted({n for s in steps for n in _placeholders(s)} - set(parameters))
        if undeclared:
            raise ValueError(
                f"steps use {', '.join('{{' + n + '}}' for n in undeclared)} but 'parameters' does not "
                "declare them"
            )
    return CustomTemplate(
        name=name,
        description=description,
        path=path,
        raw_steps=tuple(dict(s) for s in steps),
        parameters=parameters,
        authors=tuple(str(a) for a in authors if a is not None and str(a)),
    )


def template_files(folder: Path) -> list[Path]:
    """``*.yaml`` and ``*.yml`` files of ``folder`` sorted by name (none when it does not exist)."""
    if not folder.is_dir():
        return []
    return sorted(
        (
            p
            for p in folder.iterdir()
            if p.suffix in (".yaml", ".yml")
            and not p.name.startswith(".")
            and (p.is_symlink() or p.is_file())  # a link is listed, never followed out
        ),
        key=lambda p: p.name,
    )
