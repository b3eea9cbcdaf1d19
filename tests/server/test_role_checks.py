"""The caller's role is checked in one place, the service, once per call, whatever the door.

Each operation that changes something is refused to a caller whose role lacks its tool: from the
MCP door (a real in-memory client session; the refusal as clients always got it, naming role and
tool) and from the web console's routes (in-process over ASGI), with the role check counted
(``tests.support.role_checks``): it runs exactly once for the call, and once for an allowed call
too (the MCP pipeline does not repeat it)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import READ_STEP, Client, sdk_client
from tests.support.role_checks import count_role_checks
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, RunRequest
from vmware_pilot.safety.duties import Role
from vmware_pilot.server import TOOL_NAMES, create_server
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}

# Each tool that changes something, with arguments its schema accepts (the workflow need not exist:
# the role is refused before anything is looked up).
WRITES: dict[str, dict[str, Any]] = {
    "create_workflow": {"name": "n", "description": "d", "steps": [READ_STEP]},
    "create_workflow_from_template": {"workflow_type": "investigate_alarm", "params": {}},
    "design_workflow": {"goal": "look at the alarms"},
    "update_draft": {"workflow_id": "wf-nope", "name": "x"},
    "confirm_draft": {"workflow_id": "wf-nope"},
    "run_workflow": {"workflow_id": "wf-nope"},
    "approve": {"workflow_id": "wf-nope"},
    "rollback": {"workflow_id": "wf-nope", "confirm": True},
    "cancel_workflow": {"workflow_id": "wf-nope", "reason": "r", "confirm": True},
}


def without(tool: str) -> Role:
    """A role with every tool but ``tool``."""
    return Role(f"no-{tool.replace('_', '-')}", "any", frozenset(TOOL_NAMES) - {tool})


@pytest.mark.parametrize("tool", sorted(WRITES))
async def test_the_mcp_door_refuses_a_role_without_the_tool_checking_once(
    pilot_app: PilotApp, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    role = without(tool)
    server = create_server(pilot_app, actor=Actor("rita", kind="token"), role_of=lambda _: role)
    checks = count_role_checks(monkeypatch)
    async with sdk_client(server) as session:
        refused = await Client(session).refused(tool, **WRITES[tool])
    why = "its approve rule is 'none'" if tool == "approve" else "the tool is not among the role's tools"
    assert refused == {
        "error": f"Role '{role.name}' may not call {tool}: {why}.",
        "role": role.name,
        "tool": tool,
        "hint": f"Ask an administrator for a role that includes {tool} (`vmware-pilot token set-role "
        "rita ROLE`), or use a tool this role lists.",
    }
    assert checks == [tool]
    assert pilot_app.service.list_workflows().active_total == 0  # nothing was created or changed


async def test_an_allowed_call_is_checked_once_too(
    pilot_app: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    role = without("rollback")
    server = create_server(pilot_app, actor=Actor("rita", kind="token"), role_of=lambda _: role)
    checks = count_role_checks(monkeypatch)
    async with sdk_client(server) as session:
        client = Client(session)
        workflow_id = await client.custom([READ_STEP])
        ran = await client.ok("run_workflow", workflow_id=workflow_id)
        await client.status(workflow_id)
    assert "error" not in ran, ran
    # The read is refused or let through by the pipeline (it takes no request), the writes by
    # the service alone.
    assert checks == ["create_workflow", "run_workflow", "get_workflow_status"]


# --- the console -----------------------------------------------------------------------------

CONSOLE_TOOLS = {
    "approve": "approve",
    "reject": "cancel_workflow",
    "rollback": "rollback",
    "cancel": "cancel_workflow",
}
Browser = Callable[[str], Awaitable[httpx.AsyncClient]]


def _roles_yaml() -> str:
    lines = ["roles:"]
    for tool in sorted(set(CONSOLE_TOOLS.values())):
        lines += [f"  {without(tool).name}:", "    approve: any", "    tools:"]
        lines += [f"      - {t}" for t in sorted(set(TOOL_NAMES) - {tool})]
    return "\n".join(lines) + "\n"


@pytest.fixture
async def console(settings: Settings, pilot_home: Path) -> AsyncIterator[tuple[PilotApp, Browser]]:
    (pilot_home / "roles.yaml").write_text(_roles_yaml())
    tokens = TokenStore(pilot_home / "tokens.json")
    secrets = {"alice": tokens.create("alice", "admin")}
    for tool in set(CONSOLE_TOOLS.values()):
        secrets[tool] = tokens.create(tool.replace("_", "-"), without(tool).name)
    app = build_app(settings, dispatcher=ScriptedDispatcher())
    asgi = build_http_app(
        app, HttpOptions("http"), 8080, tokens, RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    )
    opened: list[httpx.AsyncClient] = []

    async def signed_in(who: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1:8080")
        opened.append(client)
        form = await client.get("/console/login")
        answer = await client.post("/console/login", data={"csrf": _csrf(form.text), "token": secrets[who]})
        assert answer.status_code == 303, answer.text
        return client

    try:
        yield app, signed_in
    finally:
        for client in opened:
            await client.aclose()
        app.close()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


@pytest.mark.parametrize("route", sorted(CONSOLE_TOOLS))
async def test_the_console_refuses_a_role_without_the_tool_checking_once(
    console: tuple[PilotApp, Browser], monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    app, signed_in = console
    tool = CONSOLE_TOOLS[route]
    alice = Actor("alice", kind="token", role="admin")
    wid = app.service.create_workflow(CreateRequest(alice, "m", "d", [READ_STEP, GATE])).workflow_id
    assert (await app.service.run_workflow(RunRequest(alice, wid))).is_at_gate
    client = await signed_in(tool)
    page = await client.get(f"/console/workflows/{wid}/gate")
    digest = re.search(r'name="digest" value="([^"]+)"', page.text)
    form = {
        "csrf": _csrf(page.text),
        "confirm": "yes",
        "reason": "not now",
        "digest": digest[1] if digest else "",
    }
    checks = count_role_checks(monkeypatch)
    refused = await client.post(f"/console/workflows/{wid}/{route}", data=form)
    assert refused.status_code == 403, refused.text
    assert f"Role &#39;{without(tool).name}&#39; may not call {tool}" in refused.text
    assert checks == [tool]
    assert app.service.get_workflow_status(wid).payload()["state"] == "awaiting_approval"
