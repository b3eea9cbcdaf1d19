"""Acknowledgements a skill wants echoed from its own preview when a step is confirmed.

vmware-aiops deletes a VM only when the confirmed call carries ``acknowledge_blast_radius``: the
``acknowledge_with`` object of a ``delete_vm`` preview, unchanged (it re-measures the VM and
refuses when it changed since). Pilot previews every released write step at its gate
(``engine.inspection``), and the approver approves what that preview showed, so a confirmed step
that does not carry the acknowledgement itself gets the one of the gate's preview: the confirm
path aiops asks for, for any plan (a template's, a custom one, or steps given by hand). A step
that carries one keeps it; without a preview there is none to echo, and the skill refuses in its
own words. The rehearsal on a twin does the same with the preview the gate just read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.execution import gate_records

__all__ = ["ECHOES", "gate_preview", "with_echo"]

# (skill, tool) → (the confirmed call's parameter, the path of its value in the preview's answer).
ECHOES: Final[Mapping[tuple[str, str], tuple[str, tuple[str, ...]]]] = {
    ("aiops", "delete_vm"): ("acknowledge_blast_radius", ("blast_radius", "acknowledge_with")),
}


def _at(payload: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(payload, Mapping):
            return None
        payload = payload.get(key)
    return payload


def with_echo(skill: str, tool: str, params: Mapping[str, Any], preview: Any) -> dict[str, Any]:
    """``params`` with the acknowledgement ``tool`` wants taken from ``preview`` (a gate's preview
    record of the step: ``{"status", "summary", "payload"}``), when the call is confirmed, does not
    carry one, and the preview holds one."""
    out = dict(params)
    echo = ECHOES.get((skill, tool))
    if echo is None or out.get("confirm") is not True or out.get(echo[0]) is not None:
        return out
    payload = preview.get("payload") if isinstance(preview, Mapping) else None
    value = _at(payload, echo[1])
    if isinstance(value, Mapping):
        out[echo[0]] = dict(value)
    return out


def gate_preview(wf: Workflow, index: int) -> Any:
    """The preview of step ``index`` that the gate before it showed (None: no gate, no preview)."""
    gate = next((s for s in reversed(wf.steps[:index]) if s.is_gate), None)
    record = gate_records.inspection_of(wf, gate.index) if gate is not None else None
    return record.previews.get(str(index)) if record is not None else None
