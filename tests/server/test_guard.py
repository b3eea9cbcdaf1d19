"""Issue 26, points 3 and 4: the exposure switch, the runaway breaker, and waiting for a change.

Through real MCP client sessions (in memory; the stdio server itself in test_stdio.py), with the
breaker's clock under the test's control where a window has to pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import Database
from tests.support.mcp_client import INCIDENT, connect
from vmware_pilot.app import build_app
from vmware_pilot.cli.refusals import exit_code
from vmware_pilot.cli.stdio import load_settings
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import RunawayRefused, StartupRefused
from vmware_pilot.server.exposure import exposed_tools, resolve_exposure
from vmware_pilot.server.runaway import RunawayBreaker
from vmware_pilot.tooltable import TOOL_NAMES, TOOLS

READS = ["review_workflow", "get_workflow_status", "list_workflows", "get_skill_catalog"]
STEPS = [{"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}]


# --- exposure -----------------------------------------------------------------------------------


def test_read_exposure_is_the_tools_whose_effect_is_read() -> None:
    assert sorted(exposed_tools("read", "")) == sorted(READS)
    assert sorted(exposed_tools(" READ ", "cancel_workflow, approve,")) == sorted(
        [*READS, "cancel_workflow", "approve"]
    )
    assert exposed_tools("all", "") == frozenset(TOOL_NAMES)
    assert {t.name for t in TOOLS if t.effect == "read"} == set(READS)


@pytest.mark.parametrize(
    ("expose", "allow_write", "words"),
    [
        ("write", "", "tool exposure 'write' is not known"),
        ("", "", "tool exposure '' is not known"),
        ("read", "approve,no_such_tool", "'no_such_tool', which is not a tool"),
        ("all", "approve", "--allow-write only applies with --expose read"),
    ],
)
def test_a_bad_exposure_refuses_to_start_with_a_hint(expose: str, allow_write: str, words: str) -> None:
    with pytest.raises(StartupRefused) as caught:
        exposed_tools(expose, allow_write)
    assert words in caught.value.message
    assert "\n" not in caught.value.message and caught.value.hint
    assert exit_code(caught.value) == 2


def test_flags_replace_the_environment_whole() -> None:
    assert resolve_exposure(None, None, "read", "approve") == ("read", "approve")
    assert resolve_exposure("read", None, "all", "approve") == ("read", "")  # env list not mixed in
    assert resolve_exposure(None, "approve", "read", "") == ("all", "approve")  # so this is refused


def test_the_environment_is_checked_at_start_up(monkeypatch: pytest.MonkeyPatch, pilot_home: Path) -> None:
    monkeypatch.setenv("VMWARE_PILOT_HOME", str(pilot_home))
    monkeypatch.setenv("VMWARE_PILOT_MCP_EXPOSE", "read")
    monkeypatch.setenv("VMWARE_PILOT_MCP_ALLOW_WRITE", "cancel_workflow,bogus")
    with pytest.raises(StartupRefused, match="'bogus', which is not a tool"):
        load_settings(False)
    monkeypatch.setenv("VMWARE_PILOT_MCP_ALLOW_WRITE", "cancel_workflow")
    settings = load_settings(False)
    assert (settings.mcp_expose, settings.mcp_allow_write) == ("read", "cancel_workflow")
    settings = load_settings(False, expose="all")  # a flag: the environment's list is not used
    assert (settings.mcp_expose, settings.mcp_allow_write) == ("all", "")


async def test_hidden_tools_are_not_listed_and_a_call_is_answered_as_an_unknown_tool(
    pilot_home: Path,
) -> None:
    settings = Settings(home=pilot_home, mcp_expose="read", mcp_allow_write="cancel_workflow")
    app = build_app(settings)
    try:
        async with connect(app) as client:
            listed = [t.name for t in (await client.session.list_tools()).tools]
            assert listed == [n for n in TOOL_NAMES if n in {*READS, "cancel_workflow"}]
            hidden = await client.refused("create_workflow", name="x", description="x", steps=STEPS)
            unknown = await client.refused("create_workflowz", name="x", description="x", steps=STEPS)
            assert hidden == {**unknown, "error": "Unknown tool: create_workflow"}
            assert hidden["field"] == "name" and "create_workflow," not in hidden["hint"]
            assert "cancel_workflow" in hidden["hint"]
            catalog = await client.ok("get_skill_catalog")
            assert "aiops" in catalog
    finally:
        app.close()


# --- the runaway breaker ------------------------------------------------------------------------


async def test_polling_is_never_refused_while_the_26th_identical_create_is(pilot_home: Path) -> None:
    app = build_app(Settings(home=pilot_home))
    try:
        async with connect(app) as client:
            created = [
                await client.ok("create_workflow", name="same", description="d", steps=STEPS)
                for _ in range(25)
            ]
            wid = created[0]["workflow_id"]
            for _ in range(200):
                await client.ok("get_workflow_status", workflow_id=wid)
            refused = await client.refused("create_workflow", name="same", description="d", steps=STEPS)
            assert refused["tool"] == "create_workflow"
            assert (refused["limit"], refused["window_seconds"]) == (25, 120)
            assert 1 <= refused["retry_after_seconds"] <= 120
            assert "get_workflow_status" in refused["hint"] and "wait_seconds" in refused["hint"]
            # Nothing was saved by the refused call; other arguments are another call.
            listed = await client.ok("list_workflows", limit=500)
            assert listed["active_total"] == 25
            await client.ok("create_workflow", name="other", description="d", steps=STEPS)
            await client.refused("create_workflow", name="same", description="d", steps=STEPS)
    finally:
        app.close()


async def test_the_runaway_limit_comes_from_the_settings(pilot_home: Path) -> None:
    app = build_app(Settings(home=pilot_home, runaway_max=2))
    try:
        async with connect(app) as client:
            for _ in range(2):
                await client.ok("design_workflow", goal="g")
            refused = await client.refused("design_workflow", goal="g")
            assert refused["limit"] == 2
    finally:
        app.close()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_window_slides_and_each_caller_counts_apart() -> None:
    clock = _Clock()
    breaker = RunawayBreaker(3, 120, clock)
    args: dict[str, Any] = {"workflow_id": "wf-1", "confirm": True}
    for _ in range(3):
        breaker.check("token:a", "cancel_workflow", args)
        clock.now += 10
    with pytest.raises(RunawayRefused) as caught:
        breaker.check("token:a", "cancel_workflow", args)
    assert caught.value.fields["retry_after_seconds"] == 90  # the first call leaves the window then
    breaker.check("token:b", "cancel_workflow", args)  # another caller
    breaker.check("token:a", "cancel_workflow", {**args, "confirm": False})  # other arguments
    breaker.check("token:a", "rollback", args)  # another tool
    for _ in range(100):
        breaker.check("token:a", "get_workflow_status", {"workflow_id": "wf-1"})  # a read
    clock.now += 91  # the first call is now older than the window
    breaker.check("token:a", "cancel_workflow", args)
    with pytest.raises(RunawayRefused):
        breaker.check("token:a", "cancel_workflow", args)


def test_a_limit_of_zero_counts_nothing() -> None:
    breaker = RunawayBreaker(0, 120)
    for _ in range(100):
        breaker.check("tester", "create_workflow", {"name": "x"})


# --- get_workflow_status wait_seconds -----------------------------------------------------------


class _Waiting(logging.Handler):
    """Sets ``started`` when get_workflow_status logs that it is waiting (on the event loop)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.started = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("get_workflow_status: waiting"):
            self.started.set()


@contextmanager
def _watching() -> Iterator[_Waiting]:
    logger = logging.getLogger("vmware_pilot.server")
    handler, level = _Waiting(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def test_a_wait_answers_with_the_change_another_session_made(
    database: Database, pilot_home: Path
) -> None:
    app = build_app(Settings(home=pilot_home, watch_interval=0.05))
    try:
        async with connect(app, Actor("agent")) as agent, connect(app, Actor("alice")) as approver:
            created = await agent.ok(
                "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
            )
            wid = created["workflow_id"]
            before = await agent.ok("run_workflow", workflow_id=wid)
            assert before["state"] == "awaiting_approval"
            with _watching() as waiting:
                task = asyncio.create_task(agent.ok("get_workflow_status", workflow_id=wid, wait_seconds=60))
                started = asyncio.create_task(waiting.started.wait())
                await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
                # Its starting version is read and it has not answered: the approval comes after.
                assert started.done() and not task.done()
                await approver.ok("approve", workflow_id=wid, approver="alice", acknowledge_not_executed=True)
                changed = await task
            assert changed["state"] != "awaiting_approval"
            # The approval saves more than once (running, then the steps handed out): the wait
            # answers at the first of those saves, which may come before the last one.
            assert changed["state"] in {"running", (await agent.status(wid))["state"]}
    finally:
        app.close()


async def test_a_wait_with_no_change_answers_the_unchanged_record(pilot_home: Path) -> None:
    app = build_app(Settings(home=pilot_home, watch_interval=0.05))
    try:
        async with connect(app) as client:
            wid = await client.incident()
            await client.ok("run_workflow", workflow_id=wid)
            before = await client.status(wid)
            with _watching() as waiting:
                after = await client.ok("get_workflow_status", workflow_id=wid, wait_seconds=0.3)
                assert waiting.started.is_set()  # it did wait
            assert (after["state"], after["updated_at"], after["steps"]) == (
                before["state"],
                before["updated_at"],
                before["steps"],
            )
            missing = await client.refused("get_workflow_status", workflow_id="wf-nope", wait_seconds=30)
            assert "not found" in missing["error"]
            over = await client.refused("get_workflow_status", workflow_id=wid, wait_seconds=61)
            assert over["field"] == "wait_seconds"
    finally:
        app.close()
