"""subscriptions/listen (2026-07-28): a client pinned to the current revision opens a listen stream
naming workflow URIs and hears ``ResourceUpdated`` when the workflow changes, whichever app on the
database changed it; the same checks as resources/subscribe (2025-11-25, tests/server/test_subscriptions.py),
with the 2026-07-28 error codes. Over a real HTTP server: tests/transports/test_eras_wire.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.client import Client as SdkClient
from mcp.client.subscriptions import Subscription
from mcp.server.subscriptions import ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError

from tests.support.backends import Database
from tests.support.mcp_client import LEGACY, MODERN, Client, sdk_client
from tests.support.updates import Updates
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.safety.duties import BUILTIN_ROLES, Role
from vmware_pilot.server import create_server
from vmware_pilot.server.subscriptions import MAX_LISTENED, SubscriptionHub, VersionPolling, WorkflowBus


@asynccontextmanager
async def modern(app: PilotApp, role: Role | None = None) -> AsyncIterator[Client]:
    actor = Actor("rita", kind="token", role=role.name) if role else Actor("tester")
    server = create_server(app, actor=actor, role_of=(lambda _: role) if role else None)
    async with sdk_client(server, era=MODERN) as session:
        yield Client(session)


async def next_update(stream: Subscription) -> str:
    with anyio.fail_after(30):
        event = await anext(stream)
    assert isinstance(event, ResourceUpdated), event
    return event.uri


async def test_a_listener_hears_its_workflow_change(fast_app: PilotApp) -> None:
    async with modern(fast_app) as client:
        workflow_id, other = await client.incident(), await client.incident()
        uri = f"pilot://workflows/{workflow_id}"
        sdk: SdkClient = client.session
        async with sdk.listen(resource_subscriptions=[uri, f"{uri}/audit"]) as stream:
            assert stream.honored.resource_subscriptions == [uri, f"{uri}/audit"]
            await client.ok("run_workflow", workflow_id=other)  # not listened to: no event
            await client.ok("run_workflow", workflow_id=workflow_id)  # runs to the gate
            heard = {await next_update(stream), await next_update(stream)}
            assert heard == {uri, f"{uri}/audit"}


async def test_two_streams_on_one_workflow_each_hear_a_change(fast_app: PilotApp) -> None:
    async with modern(fast_app) as client, modern(fast_app) as second:
        workflow_id, sentinel = await client.incident(), await client.incident()
        uri = f"pilot://workflows/{workflow_id}"
        sentinel_uri = f"pilot://workflows/{sentinel}"
        async with (
            client.session.listen(resource_subscriptions=[uri]) as first_stream,
            second.session.listen(resource_subscriptions=[uri, sentinel_uri]) as second_stream,
        ):
            before = fast_app.store.workflows.versions([workflow_id])[workflow_id]
            await client.ok("cancel_workflow", workflow_id=workflow_id, reason="r", confirm=True)
            assert fast_app.store.workflows.versions([workflow_id])[workflow_id] == before + 1  # one change
            assert await next_update(first_stream) == uri
            assert await next_update(second_stream) == uri
            await client.ok("cancel_workflow", workflow_id=sentinel, reason="r", confirm=True)
            assert await next_update(second_stream) == sentinel_uri


async def test_the_bus_publishes_a_change_once_however_many_streams_name_it(fast_app: PilotApp) -> None:
    """The SDK's client folds a repeated pending event into one, so this is told at the bus:
    two streams naming one URI (and one the sentinel) see one event per listener per change."""
    async with modern(fast_app) as client:
        workflow_id, sentinel = await client.incident(), await client.incident()
        uri, sentinel_uri = f"pilot://workflows/{workflow_id}", f"pilot://workflows/{sentinel}"
        bus = WorkflowBus(SubscriptionHub(VersionPolling(fast_app.store.workflows.versions, 0.05)))
        heard: list[tuple[int, str]] = []

        def listener(number: int) -> Callable[[ServerEvent], None]:
            def hear(event: ServerEvent) -> None:
                assert isinstance(event, ResourceUpdated)
                heard.append((number, event.uri))

            return hear

        async def until(seen: tuple[int, str]) -> None:
            with anyio.fail_after(30):
                while seen not in heard:
                    await anyio.sleep(0.01)

        unsubscribe = [bus.subscribe(listener(1)), bus.subscribe(listener(2))]
        await bus.watch(uri, workflow_id)  # the first stream
        await bus.watch(uri, workflow_id)  # the second, which also names the sentinel
        await bus.watch(sentinel_uri, sentinel)
        await client.ok("cancel_workflow", workflow_id=workflow_id, reason="r", confirm=True)  # one change
        await until((2, uri))
        # A later change, told in a later round: a second notice of the first would come before it.
        await client.ok("cancel_workflow", workflow_id=sentinel, reason="r", confirm=True)
        await until((2, sentinel_uri))
        for stop in unsubscribe:
            stop()
        bus.unwatch(uri, workflow_id)
        bus.unwatch(uri, workflow_id)
        bus.unwatch(sentinel_uri, sentinel)
    # each listener filters by its own stream's URIs in the SDK's ListenHandler; the bus tells all
    assert sorted(heard) == sorted([(1, uri), (1, sentinel_uri), (2, uri), (2, sentinel_uri)])


async def test_a_change_made_through_another_app_on_the_database_reaches_the_listener(
    fast_app: PilotApp, pilot_home: Path, database: Database
) -> None:
    """Another replica: its own app (store, engine) on the same database, and its own server."""
    replica = build_app(Settings(home=pilot_home, database_url=database.settings_url, watch_interval=0.05))
    try:
        async with modern(fast_app) as client, modern(replica) as elsewhere:
            workflow_id = await client.incident()
            uri = f"pilot://workflows/{workflow_id}"
            async with client.session.listen(resource_subscriptions=[uri]) as stream:
                await elsewhere.ok(
                    "cancel_workflow", workflow_id=workflow_id, reason="not needed", confirm=True
                )
                assert await next_update(stream) == uri
            assert (await client.status(workflow_id))["state"] == "cancelled"
    finally:
        replica.close()


async def test_the_2025_subscription_and_a_2026_stream_hear_the_same_change(fast_app: PilotApp) -> None:
    updates = Updates()
    server = create_server(fast_app, actor=Actor("tester"))
    async with (
        sdk_client(server, era=LEGACY, message_handler=updates) as legacy_session,
        modern(fast_app) as client,
    ):
        workflow_id = await client.incident()
        uri = f"pilot://workflows/{workflow_id}"
        await legacy_session.subscribe_resource(uri)
        async with client.session.listen(resource_subscriptions=[uri]) as stream:
            await client.ok("run_workflow", workflow_id=workflow_id)
            assert await next_update(stream) == uri
            await updates.wait(uri)


@pytest.mark.backends("sqlite")
async def test_a_role_that_may_not_read_workflows_cannot_listen(fast_app: PilotApp) -> None:
    async with modern(fast_app) as admin:
        workflow_id = await admin.incident()
    uri = f"pilot://workflows/{workflow_id}"
    planner = Role("planner", "none", frozenset({"list_workflows", "design_workflow"}))
    async with modern(fast_app, planner) as limited:
        with pytest.raises(MCPError) as refused:
            async with limited.session.listen(resource_subscriptions=[uri]):
                pass
        assert refused.value.error.code == -32600
        assert refused.value.error.data["hint"] and "get_workflow_status" in refused.value.error.data["hint"]
    async with modern(fast_app, BUILTIN_ROLES["reader"]) as reader:
        async with reader.session.listen(resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri]


@pytest.mark.backends("sqlite")
@pytest.mark.parametrize(
    ("uri", "code"),
    # -32602 for a workflow that does not exist: 2026-07-28 retired -32002 (SEP-2164)
    [("pilot://workflows/wf-missing", -32602), ("pilot://templates", -32602), ("pilot://catalog", -32602)],
)
async def test_listening_to_something_that_cannot_change_is_refused(
    fast_app: PilotApp, uri: str, code: int
) -> None:
    async with modern(fast_app) as client:
        with pytest.raises(MCPError) as refused:
            async with client.session.listen(resource_subscriptions=[uri]):
                pass
        assert refused.value.error.code == code
        assert refused.value.error.data["hint"]


@pytest.mark.backends("sqlite")
async def test_a_stream_naming_too_many_workflows_is_refused(fast_app: PilotApp) -> None:
    uris = [f"pilot://workflows/wf-{i}" for i in range(MAX_LISTENED + 1)]
    async with modern(fast_app) as client:
        with pytest.raises(MCPError) as refused:
            async with client.session.listen(resource_subscriptions=uris):
                pass
    assert refused.value.error.code == -32602 and refused.value.error.data["hint"]
