"""MCP server fixtures: the app on the test's home (``settings``), ``fast_app`` on each backend, and an in-memory client session
against it (tests/support/mcp_client.py: ``Client``, ``connect``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.backends import Database
from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


@pytest.fixture
def fast_app(pilot_home: Path, database: Database) -> Iterator[PilotApp]:
    """The app on each backend, polling workflow versions every 50 ms (subscriptions and listen).
    On PostgreSQL a CLI process finds the database by the URL the ``database`` fixture put in the
    environment: another replica sharing it."""
    app = build_app(Settings(home=pilot_home, database_url=database.settings_url, watch_interval=0.05))
    yield app
    app.close()


@pytest.fixture
async def client(pilot_app: PilotApp) -> AsyncIterator[Client]:
    # The session's task group must be entered and left by one task; pytest-asyncio runs fixture
    # setup and teardown in different tasks, so a background task owns the connection.
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with connect(pilot_app) as c:
                ready.set_result(c)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await ready
    finally:
        stop.set()
        await task
