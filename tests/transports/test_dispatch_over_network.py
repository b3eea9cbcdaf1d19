"""`--dispatch` over the network: Pilot runs the steps in the skill's server under its own account,
the audit names who created, approved and ran what, and other callers are served meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import anyio
import pytest

from tests.support import FAKE_SKILL
from tests.support.server_proc import start_server
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.tokens import TokenStore

pytestmark = pytest.mark.slow

ROLES = "roles:\n  operator:\n    approve: others\n    tools: '*'\n"
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "go?"}}
SLOW = {"action": "run", "skill": "aiops", "tool": "slow", "params": {"seconds": 3}}


async def test_a_dispatched_run_records_the_callers_and_does_not_hold_up_other_callers(
    tmp_path: Path,
) -> None:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    (pilot_home / "roles.yaml").write_text(ROLES)
    (pilot_home / "roles.yaml").chmod(0o600)
    store = TokenStore(pilot_home / "tokens.json")
    carol, dave, erin = (store.create(n, "operator") for n in ("carol", "dave", "erin"))
    skill = {"aiops": shlex.join([sys.executable, str(FAKE_SKILL)])}
    env = {"VMWARE_PILOT_SKILL_COMMANDS": json.dumps(skill)}
    with start_server(tmp_path, ["--transport", "http", "--dispatch"], env=env) as server:
        assert "steps run in the skills' servers as" in server.stderr()
        async with connect_http(server.url, carol) as c:
            created = await c.call(
                "create_workflow", {"name": "slow-one", "description": "t", "steps": [GATE, SLOW]}
            )
            workflow_id = created.payload["workflow_id"]
            assert (await c.call("run_workflow", {"workflow_id": workflow_id})).payload[
                "state"
            ] == "awaiting_approval"
        async with connect_http(server.url, dave) as d, connect_http(server.url, erin) as e:
            approving = asyncio.ensure_future(d.call("approve", {"workflow_id": workflow_id}))
            with anyio.fail_after(60):
                while True:  # erin is answered while dave's approval runs the 3-second step
                    status = (await e.call("get_workflow_status", {"workflow_id": workflow_id})).payload
                    if status.get("in_flight"):
                        break
                    await asyncio.sleep(0.05)
                listed = await e.call("list_workflows", {"limit": 5})
            assert not listed.is_error
            assert status["in_flight"][0]["tool"] == "slow"
            assert not approving.done()
            with anyio.fail_after(60):
                done = (await approving).payload
    assert done["state"] == "completed", done
    assert done["approved_by"] == "token:dave" and done["created_by"] == "token:carol"
    assert isinstance(done["steps"][1]["result"]["pid"], int)  # answered by the skill's own process
    actors = {(e["action"], e["actor"]) for e in done["audit_log"]}
    assert {
        ("run_started", "token:carol"),
        ("approved", "token:dave"),
        ("step_completed", "token:dave"),
    } <= actors
