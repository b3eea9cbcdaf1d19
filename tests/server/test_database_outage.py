"""PostgreSQL going away under a running server: a clear retryable error, then recovery on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mcp_client import INCIDENT, connect
from tests.support.pg_server import PgServer
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings

pytestmark = pytest.mark.slow


async def test_calls_fail_retryably_while_the_database_is_down_and_work_again_after(
    own_pg: PgServer, pilot_home: Path
) -> None:
    url = own_pg.url(own_pg.new_database())
    app = build_app(Settings(home=pilot_home, database_url=url))
    try:
        async with connect(app) as client:
            created = await client.ok(
                "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
            )
            wid = str(created["workflow_id"])

            own_pg.halt()
            for tool, args in (
                ("get_workflow_status", {"workflow_id": wid}),
                ("create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}),
            ):
                refusal = await client.refused(tool, **args)
                assert refusal["error"].startswith("The workflow database is unavailable"), refusal
                assert refusal["retryable"] is True
                assert "PostgreSQL" in refusal["hint"] and "retry" in refusal["hint"]
                assert len(str(refusal)) < 2000

            own_pg.resume()  # the same process and store, no restart
            assert (await client.status(wid))["state"] == "pending"
            again = await client.ok(
                "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
            )
            assert again["workflow_id"] != wid

            # A restart nobody called during: the pooled connections are dead, and no call fails.
            own_pg.halt()
            own_pg.resume()
            assert (await client.status(wid))["state"] == "pending"
        assert app.store.audit.verify_audit().ok
    finally:
        app.close()
