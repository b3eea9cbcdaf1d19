"""Product copy for a model: the server instructions sent in ``initialize``.

Each tool's description is in the tool table (``vmware_pilot.tooltable``); parameter
descriptions live next to the parameters in ``server/tools.py``.
"""

from __future__ import annotations

__all__ = ["INSTRUCTIONS", "instructions"]

INSTRUCTIONS = """\
vmware-pilot plans, reviews, approves, runs and rolls back multi-step operations across the \
VMware skills, keeping each workflow's state and audit log.
Flow: list_workflows → create_workflow_from_template (or create_workflow with your own steps, \
or design_workflow → update_draft → confirm_draft to build a plan with the user) → \
review_workflow → run_workflow → approve at each approval gate, only after the human agreed → \
get_workflow_status.
Unless this server was started with --dispatch, Pilot runs nothing itself: you perform every \
step it returns in pending_dispatch, in order, and say so at the next gate \
(approve with acknowledge_not_executed=true).
Nothing rolls back automatically. rollback and cancel_workflow preview first; call them with \
confirm=true only after the human has seen that preview and decided."""

_MODE_HANDBACK = """
This server runs without --dispatch: every step comes back to you in pending_dispatch."""
_MODE_DISPATCH = """
This server runs with --dispatch: Pilot calls each step in its skill's own MCP server. Never \
perform a workflow's steps yourself; a long run goes on if your call times out \
(get_workflow_status shows it)."""


def instructions(dispatch: bool) -> str:
    """The server instructions, ending with which of the two modes this server is in."""
    return INSTRUCTIONS + (_MODE_DISPATCH if dispatch else _MODE_HANDBACK)
