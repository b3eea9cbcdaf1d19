"""One refusal per tool, each needing no workflow or other state: what the client tests send
through every client (the in-memory session, the Python SDK over stdio, the TypeScript SDK 1.x
and 2.x, MCP Inspector's CLI, fastmcp) to check that a refusal reaches it as a result.

The refusals come from the engine (an unknown workflow or template, a custom workflow with no
approval gate) and from the door (an argument the input schema rejects).
"""

from __future__ import annotations

from typing import Any

from vmware_pilot.tooltable import TOOL_NAMES

__all__ = ["REFUSALS"]

_NO_SUCH = {"workflow_id": "wf-nope"}

REFUSALS: dict[str, dict[str, Any]] = {
    "create_workflow": {
        "name": "ungated",
        "description": "a write with no gate",
        "steps": [{"action": "delete", "skill": "aiops", "tool": "delete_vm", "params": {"vm_name": "a"}}],
    },
    "design_workflow": {"goal": 5},
    "update_draft": _NO_SUCH,
    "confirm_draft": _NO_SUCH,
    "create_workflow_from_template": {"workflow_type": "no_such_template", "params": {}},
    "run_workflow": _NO_SUCH,
    "approve": _NO_SUCH,
    "rollback": _NO_SUCH,
    "cancel_workflow": _NO_SUCH,
    "review_workflow": _NO_SUCH,
    "get_workflow_status": _NO_SUCH,
    "list_workflows": {"limit": 0},
    "get_skill_catalog": {"verbose": True},
}
assert list(REFUSALS) == list(TOOL_NAMES), "one refusal for each tool, in the table's order"
