"""The approval form (VMWARE_PILOT_APPROVALS=elicit) over a real HTTP server, with the Python SDK's
client answering it: a token caller decides as its token, so the form asks for no name, and a name
a client sends anyway that is not the caller is refused, never silently dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestFormParams, ElicitResult

from tests.support.mcp_client import INCIDENT
from tests.support.server_proc import start_server
from vmware_pilot.transports.tokens import TokenStore

pytestmark = pytest.mark.slow


class Person:
    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self.forms: list[ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        self.forms.append(params)
        return ElicitResult(action="accept", content=self.answers.pop(0))


async def test_the_approval_form_over_http_records_the_token_and_refuses_another_name(tmp_path: Path) -> None:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    token = TokenStore(pilot_home / "tokens.json").create("client", "admin")
    person = Person()
    with start_server(tmp_path, ["--transport", "http"], env={"VMWARE_PILOT_APPROVALS": "elicit"}) as server:
        with anyio.fail_after(120):  # a hang guard
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write, elicitation_callback=person) as session,
            ):
                await session.initialize()
                created = await session.call_tool(
                    "create_workflow_from_template",
                    {"workflow_type": "incident_response", "params": INCIDENT},
                )
                assert created.structured_content is not None
                wf = created.structured_content["workflow_id"]
                run = await session.call_tool("run_workflow", {"workflow_id": wf})
                assert run.structured_content is not None
                assert run.structured_content["outcome"] == "awaiting_approval"

                person.answers = [{"decision": "approve", "approver": "Alice Smith"}, {"decision": "approve"}]
                refused = await session.call_tool(
                    "approve", {"workflow_id": wf, "acknowledge_not_executed": True}
                )
                assert refused.is_error and refused.structured_content is not None
                assert refused.structured_content["error"] == (
                    "approver 'Alice Smith' differs from the authenticated caller 'token:client'"
                )
                approved = await session.call_tool(
                    "approve", {"workflow_id": wf, "acknowledge_not_executed": True}
                )
                assert not approved.is_error and approved.structured_content is not None
                status = await session.call_tool("get_workflow_status", {"workflow_id": wf})
        assert server.stop() == 0
    # The client ended its session (DELETE) with its event stream open: that is no error.
    assert "ERROR" not in server.stderr(), server.stderr()
    assert status.structured_content is not None
    approvals = status.structured_content["gates"][0]["approvals"]
    assert [(a["approver"], a["channel"]) for a in approvals] == [("token:client", "elicit")]
    assert len(person.forms) == 2
    for form in person.forms:
        assert set(form.requested_schema["properties"]) == {
            "decision",
            "comment",
            "reason",
            "despite",
        }  # no name: the token is the approver
        assert "You decide as token:client" in form.message
