"""Literal secrets kept in process memory only, so hand-back and dispatch can use them.

The store masks secrets at rest. A step whose params held a literal secret when its workflow was
created in this process gets it back here; after a restart the value is gone and the step sees
``***`` (the redacted-secret guard then refuses it). This holds only immutable creation-time
values, never workflow state, so it cannot serve anything stale.

When several Pilots share the database (``refuse_literals``), a literal secret would be known to
one replica only, so it is refused when the plan is made, with a hint to pass a reference.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from vmware_pilot.domain.model import Workflow
from vmware_pilot.errors import InvalidInput, SecretUnavailable
from vmware_pilot.safety.redaction import MASK, has_masked_shape, is_secret_key, is_secret_ref, redact

__all__ = [
    "MASK",
    "SecretVault",
    "find_masked_secrets",
    "is_secret_ref",
    "resolve_secret_refs",
    "scrub_values",
    "secret_values",
]


_Key = tuple[str, int, str]


class SecretVault:
    """Thread-safe: tool calls run service methods in worker threads."""

    def __init__(self, refuse_literals: bool = False) -> None:
        self._values: dict[_Key, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.refuse_literals = refuse_literals

    def remember(self, wf: Workflow) -> None:
        """Keep the clear params of every step of ``wf`` that holds a secret (before saving);
        with ``refuse_literals``, refuse (InvalidInput, nothing kept) a plan that holds one."""
        if self.refuse_literals:
            _refuse_literals(wf)
        for step in wf.steps:
            for field in ("params", "rollback_params"):
                value: dict[str, Any] = getattr(step, field)
                if redact(value) != value:
                    with self._lock:
                        self._values[(wf.id, step.index, field)] = copy.deepcopy(value)

    def restore(self, workflow_id: str, index: int, field: str, stored: dict[str, Any]) -> dict[str, Any]:
        """The clear params when known and still matching ``stored``; else ``stored`` itself."""
        with self._lock:
            clear = self._values.get((workflow_id, index, field))
        if clear is not None and redact(clear) == stored:
            return copy.deepcopy(clear)
        return stored

    def forget(self, workflow_id: str) -> None:
        with self._lock:
            for key in [k for k in self._values if k[0] == workflow_id]:
                del self._values[key]


def _refuse_literals(wf: Workflow) -> None:
    found = [
        f"step {step.index} {field}.{path}"
        for step in wf.steps
        for field in ("params", "rollback_params")
        for path in find_masked_secrets(redact(getattr(step, field)))
    ]
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise InvalidInput(
            f"Refusing a literal secret ({shown}): several Pilots share this database, and a literal "
            "value would be known to this one only. Nothing was changed",
            field=found[0],
            hint="Pass the secret as a reference each Pilot resolves in its own environment, e.g. "
            '{"password": {"$env": "VC_PASSWORD"}}, with VC_PASSWORD set for every Pilot.',
        )


def find_masked_secrets(value: Any, path: str = "") -> list[str]:
    """Paths of secret-named keys whose value is the store's mask, and of texts holding a masked
    secret shape such as ``--password=***`` (the secret did not survive)."""
    found: list[str] = []
    if isinstance(value, str) and has_masked_shape(value):
        found.append(path or "a param")
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if is_secret_key(str(key)) and item == MASK:
                found.append(where)
            else:
                found.extend(find_masked_secrets(item, where))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(find_masked_secrets(item, f"{path}[{i}]"))
    return found


def resolve_secret_refs(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """A copy of ``value`` with every secret reference replaced by the variable's value."""
    if is_secret_ref(value):
        name = value["$env"]
        if name not in environ:
            raise SecretUnavailable(
                f"{path or 'a param'} refers to environment variable {name}, which is not set for Pilot",
                hint=f"Set {name} in the environment Pilot runs in (its MCP client config), then run again.",
            )
        return environ[name]
    if isinstance(value, dict):
        return {
            k: resolve_secret_refs(v, environ, f"{path}.{k}" if path else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [resolve_secret_refs(v, environ, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


# Shorter values are not scrubbed from results: replacing them would garble ordinary words.
_MIN_SCRUBBED = 6


def secret_values(stored: Any, environ: Mapping[str, str]) -> set[str]:
    """The clear secrets a dispatch of ``stored`` params sends: every ``{"$env": NAME}`` value and
    every string under a secret-named key (a literal secret restored in this process)."""
    found: set[str] = set()

    def walk(value: Any, secret: bool) -> None:
        if is_secret_ref(value):
            resolved = environ.get(value["$env"])
            if resolved:
                found.add(resolved)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, secret or is_secret_key(str(key)))
        elif isinstance(value, list):
            for item in value:
                walk(item, secret)
        elif secret and isinstance(value, str) and value and value != MASK:
            found.add(value)

    walk(stored, False)
    return {v for v in found if len(v) >= _MIN_SCRUBBED}


def scrub_values(value: Any, secrets: set[str]) -> Any:
    """A copy of ``value`` in which every occurrence of each secret inside a string is ``***``:
    what a skill echoes back (a command line, an error text) is never recorded with the secret."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {k: scrub_values(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_values(v, secrets) for v in value]
    return value
