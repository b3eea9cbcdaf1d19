"""Workflow ↔ stored JSON document, with secrets masked before anything is written.

The document holds the record of docs/contract.md#the-workflow-record without ``audit_log`` (kept
as rows in ``audit_events``) plus ``extra``, which keeps the workflow's typed records
(domain/records.py: ``gates``, ``gate_inspections``, ``handed_to``, ``run_owner``,
``requested_via``) where 3.0.0 keeps them and, as read, any key a newer build wrote there: a
document read and saved unchanged is the same text. Every value under a secret key is masked
and every text (params under ordinary keys, the goal, the description, results) is scrubbed of
secret shapes (``user:pass@``, ``Bearer …``, ``password=…``); the live values stay in the
process (``engine.secrets``). Decoding is strict about what it finds (unknown keys, states,
statuses, records under ``extra`` it cannot read → CorruptRecord) and fills the optional fields
older records may lack.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from vmware_pilot.domain.clock import from_iso, iso
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import AuditEntry, Step, Workflow
from vmware_pilot.domain.records import GateRecord, Inspection, RunOwner, StoredRecord
from vmware_pilot.errors import CorruptRecord
from vmware_pilot.safety.redaction import redact, redact_text
from vmware_pilot.templates.steps import make_step

__all__ = ["decode", "encode", "encode_document", "redact_detail"]

# The keys a stored step may carry: exactly the Step fields (its serialized form).
_STEP_KEYS = frozenset(f.name for f in dataclasses.fields(Step))
_DOC_KEYS = frozenset(
    {
        "id",
        "workflow_type",
        "state",
        "steps",
        "params",
        "created_at",
        "updated_at",
        "approved_by",
        "diff_report",
        "blocked_reason",
        "rollback_results",
        "created_by",
        "authors",
        "extra",
    }
)
T = TypeVar("T")


def redact_detail(detail: str, keep: Iterable[str] = ()) -> str:
    """An audit detail as it is stored and hashed: secrets in it masked.

    ``keep``: caller labels the detail names (``token:dave`` reads as a ``token:`` pair, but it is
    a name, not a secret); each occurrence stays as written and only the text around it is masked.
    """
    labels = sorted({k for k in keep if k and k in detail}, key=len, reverse=True)
    if not labels:
        return redact_text(detail)
    parts: list[str] = []
    pos = 0
    for found in re.finditer("|".join(map(re.escape, labels)), detail):
        parts += (redact_text(detail[pos : found.start()]), found[0])
        pos = found.end()
    parts.append(redact_text(detail[pos:]))
    return "".join(parts)


def _encode_step(step: Step) -> dict[str, Any]:
    out = step.to_dict()
    out["params"] = redact(step.params)
    out["rollback_params"] = redact(step.rollback_params)
    out["result"] = redact(step.result)
    return out


def encode_document(wf: Workflow) -> dict[str, Any]:
    """The redacted document for ``wf`` (a new structure; ``wf`` keeps its live values)."""
    return {
        "id": wf.id,
        "workflow_type": wf.workflow_type,
        "state": wf.state.value,
        "steps": [_encode_step(s) for s in wf.steps],
        "params": redact(wf.params),
        "created_at": iso(wf.created_at),
        "updated_at": iso(wf.updated_at),
        "approved_by": wf.approved_by,
        "diff_report": redact(wf.diff_report),
        "blocked_reason": redact_text(wf.blocked_reason),
        "rollback_results": redact(wf.rollback_results),
        "created_by": wf.created_by,
        "authors": list(wf.authors),
        # Structured data (gate digests, approvals by actor labels such as ``token:dave``), masked
        # by key only: a label is not a secret shape.
        "extra": redact(_encode_extra(wf), scrub_text=False),
    }


# The keys of the stored ``extra`` object this build reads into typed fields, in the order a
# new document lists them.
_EXTRA_KEYS: Final = ("requested_via", "gates", "gate_inspections", "handed_to", "run_owner")


def _encode_extra(wf: Workflow) -> dict[str, Any]:
    # A key is written when its field holds something (as before: none was ever written empty),
    # in the order the document had when read, new keys after.
    known: dict[str, Any] = {
        "requested_via": wf.requested_via or None,
        "gates": {str(i): r.stored() for i, r in wf.gates.items()} or None,
        "gate_inspections": {str(i): r.stored() for i, r in wf.inspections.items()} or None,
        "handed_to": {str(i): label for i, label in wf.handed_to.items()} or None,
        "run_owner": wf.run_owner.stored() if wf.run_owner is not None else None,
    }
    present = {k: v for k, v in known.items() if v is not None} | wf.newer_keys
    order = [k for k in wf.stored_keys if k in present]
    return {k: present[k] for k in [*order, *(k for k in present if k not in order)]}


R = TypeVar("R", bound=StoredRecord)


def _record(model: type[R], raw: object, where: str) -> R:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise _Bad(f"'{where}{at}' is not a valid {model.__name__} record: {first['msg']}") from exc


def _by_index(extra: Mapping[str, Any], key: str) -> dict[int, object]:
    raw = _get(extra, key, dict)
    bad = [str(k) for k in raw if not str(k).isdigit()]
    if bad:
        raise _Bad(f"'extra.{key}' has a key that is not a step index: {bad[0]!r}")
    return {int(k): v for k, v in raw.items()}


def _decode_extra(wf: Workflow, extra: Mapping[str, Any]) -> None:
    if "requested_via" in extra:
        wf.requested_via = _get(extra, "requested_via", str)
    if "gates" in extra:
        gates = _by_index(extra, "gates").items()
        wf.gates = {i: _record(GateRecord, r, f"extra.gates.{i}") for i, r in gates}
    if "gate_inspections" in extra:
        found = _by_index(extra, "gate_inspections").items()
        wf.inspections = {i: _record(Inspection, r, f"extra.gate_inspections.{i}") for i, r in found}
    if "handed_to" in extra:
        held = _by_index(extra, "handed_to")
        if not all(isinstance(label, str) for label in held.values()):
            raise _Bad("'extra.handed_to' holds a value that is not a caller's label")
        wf.handed_to = {i: str(label) for i, label in held.items()}
    if "run_owner" in extra:
        wf.run_owner = _record(RunOwner, extra["run_owner"], "extra.run_owner")
    wf.newer_keys = {k: v for k, v in extra.items() if k not in _EXTRA_KEYS}
    wf.stored_keys = tuple(extra)


def _json_default(value: object) -> object:
    # Values the tools return that JSON has no type for are kept as text, never dropped.
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def encode(wf: Workflow) -> str:
    """The JSON text stored in ``workflows.document``."""
    return json.dumps(encode_document(wf), ensure_ascii=False, separators=(",", ":"), default=_json_default)


class _Bad(Exception):
    """A reason the document cannot be decoded (turned into CorruptRecord)."""


def _get(doc: Mapping[str, Any], key: str, kind: type[T], default: Callable[[], T] | None = None) -> T:
    if key not in doc:
        if default is None:
            raise _Bad(f"missing '{key}'")
        return default()
    value = doc[key]
    if not isinstance(value, kind):
        raise _Bad(f"'{key}' is {type(value).__name__}, expected {kind.__name__}")
    return value


def _time(doc: Mapping[str, Any], key: str, *, required: bool) -> datetime | None:
    text = _get(doc, key, str, None if required else str)
    try:
        value = from_iso(text)
    except ValueError as exc:
        raise _Bad(f"'{key}' is not an ISO timestamp: {text!r}") from exc
    if value is None and required:
        raise _Bad(f"'{key}' is empty")
    return value


def _decode_step(raw: object, index: int) -> Step:
    if not isinstance(raw, Mapping):
        raise _Bad(f"step {index} is not an object")
    unknown = sorted(str(k) for k in raw if k not in _STEP_KEYS)
    if unknown:
        raise _Bad(f"step {index} has unknown key(s) {', '.join(unknown)}")
    status_text = _get(raw, "status", str, lambda: StepStatus.PENDING.value)
    try:
        status = StepStatus(status_text)
    except ValueError as exc:
        raise _Bad(f"step {index} has unknown status '{status_text}'") from exc
    step = make_step(
        index,
        _get(raw, "action", str, lambda: f"step_{index}"),
        _get(raw, "skill", str, lambda: "unknown"),
        _get(raw, "tool", str, lambda: "unknown"),
        _get(raw, "params", dict, dict),
        _get(raw, "rollback_tool", str, str),
        _get(raw, "rollback_params", dict, dict),
        _get(raw, "group_id", str, str),
    )
    step.status = status
    step.result = raw.get("result")
    step.started_at = _time(raw, "started_at", required=False)
    step.completed_at = _time(raw, "completed_at", required=False)
    return step


def _decode(doc: object, workflow_id: str, version: int, audit_log: list[AuditEntry]) -> Workflow:
    if not isinstance(doc, Mapping):
        raise _Bad("the document is not a JSON object")
    unknown = sorted(str(k) for k in doc if k not in _DOC_KEYS)
    if unknown:
        raise _Bad(f"unknown key(s) {', '.join(unknown)}")
    if _get(doc, "id", str) != workflow_id:
        raise _Bad(f"the document is for '{doc['id']}'")
    state_text = _get(doc, "state", str)
    try:
        state = WorkflowState(state_text)
    except ValueError as exc:
        raise _Bad(f"unknown state '{state_text}'") from exc
    authors = _get(doc, "authors", list, list)
    created_at = _time(doc, "created_at", required=True)
    updated_at = _time(doc, "updated_at", required=True)
    assert created_at is not None and updated_at is not None
    wf = Workflow(
        id=workflow_id,
        workflow_type=_get(doc, "workflow_type", str),
        _state=state,
        steps=[_decode_step(raw, i) for i, raw in enumerate(_get(doc, "steps", list, list))],
        params=_get(doc, "params", dict, dict),
        created_at=created_at,
        updated_at=updated_at,
        approved_by=_get(doc, "approved_by", str, str),
        diff_report=_get(doc, "diff_report", dict, dict),
        audit_log=audit_log,
        blocked_reason=_get(doc, "blocked_reason", str, str),
        rollback_results=_get(doc, "rollback_results", list, list),
        created_by=_get(doc, "created_by", str, str),
        authors=[str(a) for a in authors],
        version=version,
    )
    _decode_extra(wf, _get(doc, "extra", dict, dict))
    return wf


def decode(workflow_id: str, text: str, *, version: int, audit_log: list[AuditEntry]) -> Workflow:
    """The workflow stored as ``text``; CorruptRecord when it cannot be read faithfully."""
    try:
        doc = json.loads(text)
        return _decode(doc, workflow_id, version, audit_log)
    except json.JSONDecodeError as exc:
        raise CorruptRecord(workflow_id, f"invalid JSON at position {exc.pos}") from exc
    except _Bad as exc:
        raise CorruptRecord(workflow_id, str(exc)) from exc
