"""Playing an MCP Apps host for the approval card (vmware_pilot.card) in Chromium, and a real gate
for it to show: Pilot's service stops a rolling restart at its gate (the fake skills of
tests/support/prediction.py report the VM), and its run and status results are framed as the
tools frame them (docs/contract.md#framing-and-the-iserror-rule).

The host page puts the card in a sandboxed frame (scripts and pop-ups only, an opaque origin, as
hosts render ``ui://`` resources), answers its ``ui/initialize``, sends the tool result once the
card says ``ui/notifications/initialized``, answers a ``tools/call`` of ``get_workflow_status``
with the status result, and records every message the card sends (``window.fromCard``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from tests.support.fakes import ScriptedDispatcher
from tests.support.prediction import Estate, gate, restart
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest

__all__ = ["HOST_PAGE", "GateResults", "reach_gate", "tool_result"]

HOST_PAGE: Final = """<!doctype html>
<html><head><title>host</title></head><body>
<iframe id="card" sandbox="allow-scripts allow-popups" style="width: 640px; height: 640px"></iframe>
<script>
window.fromCard = [];
window.hostSetup = function (html, toolResult, statusResult, capabilities, theme) {
  var frame = document.getElementById("card");
  function reply(id, result) {
    frame.contentWindow.postMessage({ jsonrpc: "2.0", id: id, result: result }, "*");
  }
  window.addEventListener("message", function (event) {
    if (event.source !== frame.contentWindow) return;
    var m = event.data;
    window.fromCard.push(m);
    if (m.method === "ui/initialize") {
      reply(m.id, {
        protocolVersion: "2026-01-26",
        hostInfo: { name: "card-test-host", version: "1" },
        hostCapabilities: capabilities,
        hostContext: { theme: theme || "light", displayMode: "inline" }
      });
    } else if (m.method === "ui/notifications/initialized") {
      frame.contentWindow.postMessage(
        { jsonrpc: "2.0", method: "ui/notifications/tool-result", params: toolResult }, "*");
    } else if (m.method === "tools/call") {
      reply(m.id, statusResult);
    } else if (m.method === "ui/open-link") {
      reply(m.id, {});
    }
  });
  frame.srcdoc = html;
};
</script>
</body></html>
"""

WHY: Final = "Patch window CHG0012345: restart the web tier"


def tool_result(payload: dict[str, Any]) -> dict[str, Any]:
    """A Pilot result as a tool answers it: one JSON text block and the same object structured."""
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    error = bool(payload.get("error")) or payload.get("outcome") == "failed"
    return {"content": [{"type": "text", "text": text}], "structuredContent": payload, "isError": error}


@dataclass(frozen=True)
class GateResults:
    workflow_id: str
    run: dict[str, Any]  # run_workflow's result, stopped at the gate
    status: dict[str, Any]  # get_workflow_status's, with ``decision``
    approved: dict[str, Any]  # approve's by a second person: one of the two approvals needed
    status_approved: dict[str, Any]  # the status after it


async def reach_gate(settings: Settings, vm: str, requester: Actor, approver: Actor) -> GateResults:
    """A rolling restart of ``vm`` created by ``requester``, run to its gate (two approvals needed)
    by Pilot's service, and approved once by ``approver``."""
    dispatcher = ScriptedDispatcher()
    Estate(dispatcher, tools=True)
    app = build_app(settings, dispatcher=dispatcher)
    try:
        steps = [gate(expires_in_minutes=90, approvals_required=2), *restart(vm)]
        created = app.service.create_workflow(CreateRequest(requester, "restart", WHY, steps)).payload()
        wid = str(created["workflow_id"])
        run = (await app.service.run_workflow(RunRequest(requester, wid))).payload()
        assert run["outcome"] == "awaiting_approval", run
        status = app.service.get_workflow_status(wid).payload()
        assert status["decision"]["changes"], status["decision"]  # the card has changes to show
        approved = (await app.service.approve(ApproveRequest(approver, wid, gate_step=0))).payload()
        assert approved["state"] == "awaiting_approval" and approved["approvals_missing"] == 1, approved
        return GateResults(wid, run, status, approved, app.service.get_workflow_status(wid).payload())
    finally:
        app.close()
