"""Resource subscriptions: ``notifications/resources/updated`` when a subscribed workflow changes.

Both eras: a 2025-11-25 client subscribes with ``resources/subscribe`` and hears the notice on
its connection; a 2026-07-28 client opens a ``subscriptions/listen`` stream naming the workflow
URIs (``register_listen``) and hears it on that stream. Both are fed by one ``SubscriptionHub``:
the listen streams through ``WorkflowBus``, the SDK's ``SubscriptionBus`` seam, which the hub
tells of a change once per URI however many streams listen to it.

A client subscribes to ``pilot://workflows/{id}`` or ``…/audit``. Every change a workflow goes
through (a state change, a step starting or finishing, a gate reached, an approval) commits a
new version, so "changed" means "its stored version moved". Where the changes come from is a
``ChangeSource``: ``VersionPolling`` reads the versions of the watched workflows from the store
every interval, so a change made by any process sharing the database (another stdio server, the
operator CLI, an HTTP replica) reaches the subscriber. A push source (e.g. PostgreSQL
LISTEN/NOTIFY) can replace it without touching the hub.

A URI is kept in its one spelling (``resources.canonical_uri``): percent-encoded aliases of one
workflow URI are one subscription. The hub keeps subscriptions per connection; a connection that ends (``drop``) or whose stream is
closed loses its subscriptions. The watch task runs only while someone is subscribed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Collection
from typing import Any, Protocol

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST

from vmware_pilot.server import sdk
from vmware_pilot.server.resources import Refusal, canonical_uri, not_found_code, workflow_of
from vmware_pilot.server.wire import current_connection

__all__ = [
    "MAX_LISTENED",
    "ChangeSource",
    "SubscriptionHub",
    "VersionPolling",
    "WorkflowBus",
    "register_listen",
    "register_subscriptions",
]

_log = logging.getLogger("vmware_pilot.server")

MAX_LISTENED = 100
"""The most resource URIs one subscriptions/listen stream may name (each is a workflow watched)."""


class ChangeSource(Protocol):
    """Tells which watched workflows changed."""

    def watch(self, workflow_id: str) -> None:
        """Start from the workflow's current state: only later changes count."""

    async def changed(self, watched: Collection[str]) -> set[str]:
        """Wait for changes (or a while) and return the ids in ``watched`` that changed.

        ``watched`` is live: read it after waiting, as subscriptions come and go meanwhile."""


class VersionPolling:
    """A ``ChangeSource`` reading ``versions(ids)`` every ``interval`` seconds (in a worker thread)."""

    def __init__(self, versions: Callable[[Collection[str]], dict[str, int]], interval: float) -> None:
        self._versions = versions
        self._interval = interval
        self._seen: dict[str, int | None] = {}
        self._guard = threading.Lock()  # watch() runs in a worker thread, changed() on the loop

    def watch(self, workflow_id: str) -> None:
        version = self._versions([workflow_id]).get(workflow_id)
        with self._guard:
            self._seen.setdefault(workflow_id, version)

    async def changed(self, watched: Collection[str]) -> set[str]:
        await asyncio.sleep(self._interval)
        ids = list(watched)
        now = await anyio.to_thread.run_sync(self._versions, ids)
        with self._guard:
            moved = {i for i in ids if i in self._seen and now.get(i) != self._seen[i]}
            for i in ids:
                self._seen[i] = now.get(i)
            for i in set(self._seen) - set(watched):
                del self._seen[i]
        return moved


async def version_of(versions: Callable[[list[str]], dict[str, int]], workflow_id: str) -> int | None:
    """The workflow's stored version (``None``: no such workflow), read in a worker thread."""
    return (await anyio.to_thread.run_sync(versions, [workflow_id])).get(workflow_id)


async def version_moved(
    versions: Callable[[list[str]], dict[str, int]],
    workflow_id: str,
    seen: int | None,
    wait: float,
    interval: float,
) -> int | None:
    """The workflow's stored version once it is no longer ``seen`` (any process's save), or after
    ``wait`` seconds the one it still is. A look every ``interval`` seconds reads only the version,
    in a worker thread: between looks nothing is held but this coroutine. A caller that reads
    ``seen`` before the state it waits to see change misses no save landing in between."""
    now = seen
    with anyio.move_on_after(wait):
        while now == seen:
            await anyio.sleep(interval)
            now = await version_of(versions, workflow_id)
    return now


class _Sender(Protocol):
    async def send_resource_updated(self, uri: str) -> None: ...


class SubscriptionHub:
    """Subscriptions of every connection to this server, and the task that announces changes."""

    def __init__(self, source: ChangeSource) -> None:
        self._source = source
        # workflow id -> connection -> (its session, the URIs it subscribed to)
        self._subs: dict[str, dict[object, tuple[_Sender, set[str]]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def subscribe(self, connection: object, session: _Sender, uri: str, workflow_id: str) -> None:
        # Registered before the baseline is read, so a poll in between seeds it instead.
        _, uris = self._subs.setdefault(workflow_id, {}).setdefault(connection, (session, set()))
        uris.add(uri)
        await anyio.to_thread.run_sync(self._source.watch, workflow_id)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._announce())

    def unsubscribe(self, connection: object, uri: str, workflow_id: str) -> None:
        entry = self._subs.get(workflow_id, {}).get(connection)
        if entry is not None:
            entry[1].discard(uri)
            if not entry[1]:
                self._forget(workflow_id, connection)

    def drop(self, connection: object) -> None:
        """Forget every subscription of a connection that ended."""
        for workflow_id in list(self._subs):
            self._forget(workflow_id, connection)
        if not self._subs and self._task is not None:
            self._task.cancel()
            self._task = None

    def _forget(self, workflow_id: str, connection: object) -> None:
        by_connection = self._subs.get(workflow_id, {})
        by_connection.pop(connection, None)
        if not by_connection:
            self._subs.pop(workflow_id, None)

    async def _announce(self) -> None:
        failing = False
        while self._subs:
            try:
                changed = await self._source.changed(self._subs.keys())
            except asyncio.CancelledError:
                raise
            except Exception:  # the store may be briefly unavailable: try again next round
                if not failing:  # once per outage, not once per round
                    _log.warning("checking subscribed workflows for changes failed", exc_info=True)
                failing = True
                continue
            failing = False
            for workflow_id in changed:
                for connection, (session, uris) in list(self._subs.get(workflow_id, {}).items()):
                    await self._send(connection, session, uris)

    async def _send(self, connection: object, session: _Sender, uris: Collection[str]) -> None:
        for uri in sorted(uris):
            try:
                await session.send_resource_updated(uri)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.drop(connection)
                return
            except Exception:
                _log.debug("resource update for %s not delivered", uri, exc_info=True)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        self._subs.clear()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class WorkflowBus:
    """The ``SubscriptionBus`` of this server's ``subscriptions/listen`` streams, fed by the hub.

    Events fan out in this process (the SDK's ``InMemorySubscriptionBus``); what makes a change
    made by another replica or process reach a listener is the hub's ``ChangeSource``, which reads
    the store's versions. ``watch``/``unwatch`` tell the hub which URIs the open streams name
    (counted: the hub is subscribed once per URI, so each change is published once and every
    stream naming that URI gets it once)."""

    def __init__(self, hub: SubscriptionHub) -> None:
        self._hub = hub
        self._local = InMemorySubscriptionBus()
        self._streams: dict[str, int] = {}  # URI as a stream named it -> streams naming it

    async def publish(self, event: ServerEvent) -> None:
        await self._local.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        return self._local.subscribe(listener)

    async def send_resource_updated(self, uri: str) -> None:
        """What the hub calls when ``uri``'s workflow changed."""
        await self.publish(ResourceUpdated(uri=uri))

    async def watch(self, uri: str, workflow_id: str) -> None:
        self._streams[uri] = self._streams.get(uri, 0) + 1
        if self._streams[uri] == 1:
            await self._hub.subscribe(self, self, uri, workflow_id)

    def unwatch(self, uri: str, workflow_id: str) -> None:
        left = self._streams.get(uri, 0) - 1
        if left > 0:
            self._streams[uri] = left
            return
        self._streams.pop(uri, None)
        self._hub.unsubscribe(self, uri, workflow_id)


def _workflow(uri: str, refusal: Refusal) -> str:
    """The workflow ``uri`` names, when the caller may hear of its changes; MCPError otherwise."""
    workflow_id = workflow_of(uri)
    if workflow_id is None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Only workflow resources can be subscribed to, not {uri[:200]}",
            data={"uri": uri[:200], "hint": "Subscribe to pilot://workflows/{workflow_id}."},
        )
    refused = refusal("get_workflow_status")
    if refused is not None:
        raise MCPError(code=INVALID_REQUEST, message=refused.message, data={"uri": uri, "hint": refused.hint})
    return workflow_id


async def _existing(
    ctx: ServerRequestContext[Any, Any], uri: str, workflow_id: str, exists: Callable[[str], bool]
) -> None:
    if not await anyio.to_thread.run_sync(exists, workflow_id):
        raise MCPError(
            code=not_found_code(ctx.protocol_version),
            message=f"Workflow '{workflow_id}' not found",
            data={"uri": uri, "hint": "Use list_workflows() to see active workflow IDs."},
        )


def register_listen(
    lowlevel: Server[Any], bus: WorkflowBus, refusal: Refusal, exists: Callable[[str], bool]
) -> None:
    """Serve ``subscriptions/listen`` (2026-07-28) on ``lowlevel``: the SDK's ``ListenHandler`` on
    ``bus``, after the same checks as ``resources/subscribe``.

    At most ``MAX_LISTENED`` URIs; each must be an existing workflow's (or its audit's) and the
    caller's role must read workflows; otherwise the listen request gets a JSON-RPC error naming
    the problem and no stream opens. The list-changed flags are acknowledged as the SDK does
    (Pilot's lists do not change while it serves, so they never fire). The URIs are watched while
    the stream is open."""
    streams = ListenHandler(bus)

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        named = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        if len(named) > MAX_LISTENED:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"A listen stream names at most {MAX_LISTENED} resources, not {len(named)}",
                data={"hint": "Open another stream for the rest, or listen to fewer workflows."},
            )
        watched = [(uri, _workflow(uri, refusal)) for uri in named]
        for uri, workflow_id in watched:
            await _existing(ctx, uri, workflow_id, exists)
        opened: list[tuple[str, str]] = []
        try:
            for uri, workflow_id in watched:
                await bus.watch(uri, workflow_id)
                opened.append((uri, workflow_id))
            return await streams(ctx, params)
        finally:
            for uri, workflow_id in opened:
                bus.unwatch(uri, workflow_id)

    lowlevel.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, listen)


def register_subscriptions(
    lowlevel: Server[Any], hub: SubscriptionHub, refusal: Refusal, exists: Callable[[str], bool]
) -> None:
    """Install resources/subscribe and resources/unsubscribe on ``lowlevel`` (workflow URIs only;
    2025-11-25 connections: the 2026-07-28 revision has no such methods).

    Subscribing needs the role to read workflows (get_workflow_status) and an existing workflow
    (``exists``); otherwise the request gets a JSON-RPC error naming the problem. A connection's
    subscriptions end with it."""

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        workflow_id = _workflow(uri, refusal)
        await _existing(ctx, uri, workflow_id, exists)
        # Kept under the URI's one spelling: percent-encoded aliases of it are one subscription,
        # told once per change.
        canonical = canonical_uri(uri) or uri
        connection = current_connection(on_end=hub.drop)
        await hub.subscribe(connection, sdk.connection_of(ctx.session), canonical, workflow_id)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        workflow_id = _workflow(uri, refusal)
        hub.unsubscribe(current_connection(), canonical_uri(uri) or uri, workflow_id)
        return types.EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
