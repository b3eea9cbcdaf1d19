"""The requestState of a 2026-07-28 call's rounds, sealed by one replica and accepted by another
(VMWARE_PILOT_REQUEST_STATE_KEYS, ``server.factory.request_state_security``): two servers built by
``create_server`` on the same keys accept each other's; a server on other keys, or on the SDK's key
of its process alone (the default), refuses it with the SDK's -32602, through a real 2.x client.

The state is sealed by replica A's own request-state boundary (tests/support/request_state.py):
no Pilot tool asks for input on this era yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, closing

import pytest
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr, ValidationError

from tests.support.mcp_client import MODERN, READ_STEP, sdk_client
from tests.support.request_state import sealed
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings, settings_problem
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest
from vmware_pilot.server import create_server, sdk
from vmware_pilot.server.pipeline import PilotMCPServer

SHARED = "a" * 32 + ",old-" + "b" * 32
OTHER = "c" * 40
ALICE = Actor("alice")


@pytest.fixture
def apps(settings: Settings) -> Iterator[dict[str, PilotApp]]:
    """Pilots on one store: A and B on the shared keys, C on others, D on its own process's key."""
    keys = {"a": SHARED, "b": SHARED, "c": OTHER, "d": ""}
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(
                closing(build_app(settings.model_copy(update={"request_state_keys": SecretStr(value)})))
            )
            for name, value in keys.items()
        }


def _boundary(server: PilotMCPServer) -> RequestStateBoundary:
    """The request-state boundary ``server`` seals and unseals with."""
    return next(m for m in sdk.lowlevel(server).middleware if isinstance(m, RequestStateBoundary))


async def test_a_request_state_sealed_by_one_replica_is_accepted_by_another_on_the_same_keys(
    apps: dict[str, PilotApp],
) -> None:
    servers = {name: create_server(app, actor=ALICE) for name, app in apps.items()}
    workflow_id = apps["a"].service.create_workflow(CreateRequest(ALICE, "ops", "t", [READ_STEP])).workflow_id
    arguments = {"workflow_id": workflow_id}
    state = await sealed(_boundary(servers["a"]), "get_workflow_status", arguments)
    async with sdk_client(servers["b"], era=MODERN) as b:
        answered = await b.call_tool("get_workflow_status", arguments, request_state=state)
    assert not answered.is_error and answered.structured_content is not None
    assert answered.structured_content["id"] == workflow_id
    for name in ("c", "d"):
        async with sdk_client(servers[name], era=MODERN) as elsewhere:
            with pytest.raises(MCPError) as refused:
                await elsewhere.call_tool("get_workflow_status", arguments, request_state=state)
        assert refused.value.error.code == -32602
        assert refused.value.error.message == "Invalid or expired requestState"


def test_request_state_keys_must_be_long_secrets_and_are_never_echoed(settings: Settings) -> None:
    secret = "short-secret-value"
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate({**settings.model_dump(), "request_state_keys": f"{'x' * 32},{secret}"})
    problem = settings_problem(caught.value)
    assert "VMWARE_PILOT_REQUEST_STATE_KEYS" in problem and "32 characters" in problem
    assert secret not in problem and "x" * 32 not in problem
    assert secret not in repr(settings.model_copy(update={"request_state_keys": SecretStr(secret)}))
