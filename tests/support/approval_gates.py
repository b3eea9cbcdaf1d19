"""A gated power-off, a person answering the approval form, and an MCP session with elicitation (the approval tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp_types import ElicitRequestFormParams, ElicitResult

from tests.support.mcp_client import Client, sdk_client
from vmware_pilot.app import PilotApp
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import create_server

OFF = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web-01"},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "web-01"},
}


def gate(**options: Any) -> dict[str, Any]:
    params = {"message": "Power off web-01 for maintenance?", **options}
    return {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": params}


Answer = Callable[[ElicitRequestFormParams], Awaitable[ElicitResult]]


class Person:
    """Answers the approval form the way a test scripts it, and keeps what it was shown."""

    def __init__(self, answer: Answer | dict[str, Any] | str) -> None:
        self.answer = answer
        self.forms: list[ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        self.forms.append(params)
        if callable(self.answer):
            return await self.answer(params)
        if isinstance(self.answer, str):
            return ElicitResult(action=self.answer)  # type: ignore[arg-type]
        return ElicitResult(action="accept", content=self.answer)


@asynccontextmanager
async def session(
    app: PilotApp, person: Person | None = None, actor: Actor | None = None
) -> AsyncIterator[Client]:
    server = create_server(app, actor=actor or Actor("tester"))
    async with sdk_client(server, elicitation_callback=person) as s:
        yield Client(s)


OPERATORS = """\
approvals:
  - name: operators-only
    match: {tool: "aiops.*"}
    approvers: [operator]
"""


def write_policy(settings: Settings, text: str) -> None:
    path = settings.resolved_policies_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
