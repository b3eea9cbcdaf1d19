"""Many callers against one real `vmware-pilot mcp --transport http` process (loopback).

50 clients, each with its own token and session, make 20 calls each at the same time: their own
workflow, reads, and edits of one shared draft. Nothing may fail and no edit may be lost.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.server_proc import start_server
from vmware_pilot.transports.client import PilotClient, connect_http
from vmware_pilot.transports.tokens import TokenStore

pytestmark = pytest.mark.slow

CLIENTS = 50
CALLS = 20
INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU"}


def _read_step(client: int, call: int) -> dict[str, Any]:
    return {
        "action": "list",
        "skill": "aiops",
        "tool": "list_virtual_machines",
        "params": {"note": f"c{client}-{call}"},
    }


async def _caller(client: PilotClient, index: int, draft: str) -> tuple[str, int, list[str]]:
    """20 calls; returns (own workflow id, number of draft edits, errors seen)."""
    errors: list[str] = []

    async def call(tool: str, **arguments: Any) -> dict[str, Any]:
        reply = await client.call(tool, arguments)
        if reply.is_error:
            errors.append(f"{tool}: {reply.payload.get('error')}")
        return reply.payload

    created = await call("create_workflow_from_template", workflow_type="incident_response", params=INCIDENT)
    own = str(created.get("workflow_id", ""))
    edits = 0
    for n in range(1, CALLS):
        match n % 4:
            case 1 | 3:
                await call("update_draft", workflow_id=draft, steps=[_read_step(index, n)])
                edits += 1
            case 2:
                await call("get_workflow_status", workflow_id=own)
            case _:
                await call("list_workflows", limit=5)
    return own, edits, errors


async def test_fifty_callers_making_twenty_calls_each_see_no_errors_and_lose_no_update(
    tmp_path: Path,
) -> None:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    store = TokenStore(pilot_home / "tokens.json")
    lead = store.create("lead", "admin")
    secrets = [store.create(f"c{i}", "admin") for i in range(CLIENTS)]
    with start_server(tmp_path, ["--transport", "http"]) as server:
        async with connect_http(server.url, lead) as lead_client:
            draft = str(
                (await lead_client.call("design_workflow", {"goal": "shared plan"})).payload["workflow_id"]
            )

            async def one(i: int) -> tuple[str, int, list[str]]:
                async with connect_http(server.url, secrets[i]) as client:
                    return await _caller(client, i, draft)

            with anyio.fail_after(300):
                results = await asyncio.gather(*(one(i) for i in range(CLIENTS)))
            status = (await lead_client.call("get_workflow_status", {"workflow_id": draft})).payload
            listing = (await lead_client.call("list_workflows", {"limit": 1})).payload
            owners = {
                own: (await lead_client.call("get_workflow_status", {"workflow_id": own})).payload[
                    "created_by"
                ]
                for own, _, _ in results
            }
        assert server.stop() == 0
    assert [e for _, _, errors in results for e in errors] == []
    # Every caller's every edit is in the shared draft's audit trail, under the caller's name.
    edits = Counter(e["actor"] for e in status["audit_log"] if e["action"] == "steps_updated")
    assert edits == Counter({f"token:c{i}": results[i][1] for i in range(CLIENTS)})
    assert sum(edits.values()) == CLIENTS * 10
    assert sorted(status["authors"]) == sorted(f"token:c{i}" for i in range(CLIENTS))
    assert status["created_by"] == "token:lead"
    # Each caller's own workflow exists once, created by that caller.
    assert sorted(owners.values()) == sorted(f"token:c{i}" for i in range(CLIENTS))
    assert listing["active_total"] == CLIENTS + 1
