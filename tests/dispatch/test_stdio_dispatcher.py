"""The pooled stdio dispatcher against real MCP server processes (a fault-injecting fake skill)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import FAKE_SKILL
from tests.support.dispatch_options import command, options
from vmware_pilot.dispatch.protocol import OutcomeKind
from vmware_pilot.dispatch.session import SkillSession
from vmware_pilot.dispatch.stdio import StdioDispatcher
from vmware_pilot.errors import DispatchRefused, EffectUnknown
from vmware_pilot.templates.steps import make_step


@pytest.fixture
async def dispatcher() -> AsyncIterator[StdioDispatcher]:
    d = StdioDispatcher(options(), env=dict(os.environ))
    yield d
    await d.aclose()


async def test_one_session_is_reused_across_calls(dispatcher: StdioDispatcher) -> None:
    first = await dispatcher.call("aiops", "echo", {"value": "a"})
    second = await dispatcher.call("vmware-aiops", "echo", {"value": "b"})
    assert first.kind is second.kind is OutcomeKind.SUCCEEDED
    assert first.payload["pid"] == second.payload["pid"]
    assert second.payload["value"] == "b"
    assert dispatcher.started == 1
    assert dispatcher.open_sessions() == {"aiops": 1}


async def _open(d: StdioDispatcher, skill: str, count: int) -> None:
    for _ in range(400):
        if d.open_sessions().get(skill, 0) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} sessions of {skill} never opened: {d.open_sessions()}")


@pytest.mark.slow
async def test_prepared_sessions_run_concurrent_calls_side_by_side(
    dispatcher: StdioDispatcher, tmp_path: Path
) -> None:
    # Each call waits inside its skill server until all three are inside: they can only all be
    # met if the dispatcher ran them at the same time (one after another, the first never is).
    await dispatcher.prepare({"aiops": 3})
    await _open(dispatcher, "aiops", 3)
    args = {"folder": str(tmp_path), "parties": 3}
    outcomes = await asyncio.gather(*(dispatcher.call("aiops", "rendezvous", args) for _ in range(3)))
    assert [o.payload["met"] for o in outcomes] == [True, True, True]
    assert len({o.payload["pid"] for o in outcomes}) == 3
    assert dispatcher.started == 3


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_on_a_cold_pool_quick_calls_share_the_first_server_and_start_no_other(
    dispatcher: StdioDispatcher,
) -> None:
    """No call waits for a server of its own, and none is started for a queue shorter than a start."""
    outcomes = await asyncio.gather(*(dispatcher.call("aiops", "echo", {"value": str(i)}) for i in range(3)))
    assert [o.payload["value"] for o in outcomes] == ["0", "1", "2"]
    assert len({o.payload["pid"] for o in outcomes}) == 1
    await asyncio.sleep(0.5)
    assert dispatcher.started == 1 and dispatcher.open_sessions() == {"aiops": 1}


@pytest.mark.slow  # several server processes
async def test_a_queue_longer_than_a_start_opens_another_server_behind_the_first(
    dispatcher: StdioDispatcher,
) -> None:
    outcomes = await asyncio.gather(*(dispatcher.call("aiops", "slow", {"seconds": 3}) for _ in range(3)))
    assert all(o.kind is OutcomeKind.SUCCEEDED for o in outcomes)
    # More than the first server took the queue; how many more depends on how long a start took.
    assert 2 <= dispatcher.started <= 3
    assert len({o.payload["pid"] for o in outcomes}) >= 2


@pytest.mark.slow  # several server processes
async def test_prepare_never_opens_more_than_the_pool_size() -> None:
    d = StdioDispatcher(options(pool_size=2), env=dict(os.environ))
    try:
        await d.prepare({"aiops": 5})
        await _open(d, "aiops", 2)
        await asyncio.sleep(0.5)
        assert d.open_sessions() == {"aiops": 2} and d.started == 2
    finally:
        await d.aclose()


def _fake_skills_running() -> list[int]:
    """Pids of this test process's fake skill servers still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if parent == str(os.getpid()) and FAKE_SKILL.name.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.slow  # several server processes
async def test_closing_while_sessions_start_leaves_no_server_behind() -> None:
    d = StdioDispatcher(options(), env=dict(os.environ))
    await d.prepare({"aiops": 2})
    await _open(d, "aiops", 1)  # one open, the next one starting
    await d.aclose()
    assert _fake_skills_running() == []
    # Closed, it still serves: a later call starts afresh.
    again = await d.call("aiops", "echo", {"value": "again"})
    assert again.kind is OutcomeKind.SUCCEEDED
    await d.aclose()


@pytest.mark.slow  # several server processes
async def test_server_killed_mid_call_is_effect_unknown_then_restarted(dispatcher: StdioDispatcher) -> None:
    before = await dispatcher.call("aiops", "echo", {})
    with pytest.raises(EffectUnknown, match="UNKNOWN"):
        await dispatcher.call("aiops", "die", {})
    after = await dispatcher.call("aiops", "echo", {})
    assert after.kind is OutcomeKind.SUCCEEDED
    assert after.payload["pid"] != before.payload["pid"]


async def _killed_while_idle(dispatcher: StdioDispatcher) -> int:
    """Start a session, kill its server between calls, wait until its end reached the client."""
    pid: int = (await dispatcher.call("aiops", "echo", {})).payload["pid"]
    os.kill(pid, signal.SIGKILL)
    session = dispatcher._pools["aiops"].sessions[0]
    for _ in range(100):
        await asyncio.sleep(0.05)
        if session._write is None or not session._write.connected:
            break
    return pid


@pytest.mark.slow  # several server processes
async def test_server_that_died_while_idle_is_replaced_and_the_call_is_sent(
    dispatcher: StdioDispatcher,
) -> None:
    dead = await _killed_while_idle(dispatcher)
    assert dispatcher.open_sessions() == {"aiops": 0}
    after = await dispatcher.call("aiops", "echo", {"value": "x"})
    assert after.kind is OutcomeKind.SUCCEEDED and after.payload["pid"] != dead
    assert dispatcher.started == 2


@pytest.mark.slow  # several server processes
async def test_a_reused_session_found_closed_when_sending_is_retried_on_a_new_server(
    dispatcher: StdioDispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race where the server's exit is noticed only when the request is written.
    monkeypatch.setattr(SkillSession, "alive", property(lambda self: self._session is not None))
    dead = await _killed_while_idle(dispatcher)
    after = await dispatcher.call("aiops", "echo", {"value": "x"})
    assert after.kind is OutcomeKind.SUCCEEDED and after.payload["pid"] != dead
    assert dispatcher.started == 2


@pytest.mark.slow  # several server processes
async def test_hanging_call_times_out_as_unknown_and_the_session_is_dropped() -> None:
    d = StdioDispatcher(options(call_timeout=0.5), env=dict(os.environ))
    try:
        with pytest.raises(EffectUnknown, match="did not answer hang within"):
            await d.call("aiops", "hang", {})
        assert d.open_sessions().get("aiops", 0) == 0
        assert (await d.call("aiops", "echo", {})).kind is OutcomeKind.SUCCEEDED
    finally:
        await d.aclose()


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_server_that_cannot_start_means_nothing_was_sent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="vmware_pilot")
    d = StdioDispatcher(options(overrides={"aiops": command("nostart")}), env=dict(os.environ))
    try:
        with pytest.raises(DispatchRefused, match="nothing was run"):
            await d.call("aiops", "echo", {})
    finally:
        await d.aclose()
    # One WARNING line naming the skill, the cause and its last words; its stderr itself at DEBUG.
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name.startswith("vmware_pilot")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    summary = warnings[0].getMessage()
    assert summary.startswith("skill aiops did not start (") and "\n" not in summary
    assert summary.endswith("its last line: fake skill: refusing to start")
    relayed = [r for r in caplog.records if r.name == "vmware_pilot.skill.aiops"]
    assert [(r.levelname, r.getMessage()) for r in relayed] == [("DEBUG", "fake skill: refusing to start")]


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_preview_and_tool_errors_are_judged(dispatcher: StdioDispatcher) -> None:
    assert (await dispatcher.call("aiops", "preview", {"vm_name": "x"})).kind is OutcomeKind.PREVIEW_ONLY
    boom = await dispatcher.call("aiops", "boom", {})
    assert boom.kind is OutcomeKind.FAILED and "on purpose" in boom.message
    unknown_tool = await dispatcher.call("aiops", "no_such_tool", {})
    assert unknown_tool.kind is OutcomeKind.FAILED


@pytest.mark.slow
async def test_idle_sessions_are_closed() -> None:
    d = StdioDispatcher(options(idle_seconds=0.2), env=dict(os.environ))
    try:
        await d.call("aiops", "echo", {})
        assert d.open_sessions() == {"aiops": 1}
        for _ in range(50):
            await asyncio.sleep(0.1)
            if not d.open_sessions().get("aiops"):
                break
        assert d.open_sessions().get("aiops", 0) == 0
    finally:
        await d.aclose()


@pytest.mark.slow  # several server processes
async def test_per_call_mode_starts_a_fresh_server_each_time() -> None:
    d = StdioDispatcher(options(per_call=True), env=dict(os.environ))
    try:
        a = await d.call("aiops", "echo", {})
        b = await d.call("aiops", "echo", {})
        assert a.payload["pid"] != b.payload["pid"]
        assert d.started == 2 and d.open_sessions() == {}
    finally:
        await d.aclose()


async def test_preflight_lists_every_skill_that_cannot_start(dispatcher: StdioDispatcher) -> None:
    steps = [
        make_step(0, "a", "aiops", "echo"),
        make_step(1, "b", "storage", "x"),
        make_step(2, "c", "pilot", "y"),
    ]
    problems = await dispatcher.preflight(steps)
    assert len(problems) == 2
    assert problems[0].startswith("step 1 (storage.x)") and "vmware-storage" in problems[0]
    assert "does not dispatch to itself" in problems[1]


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_a_skills_stderr_goes_to_pilots_log_and_its_error_is_one_line(
    dispatcher: StdioDispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="vmware_pilot.skill")
    outcome = await dispatcher.call("aiops", "noisy", {})
    assert outcome.kind is OutcomeKind.FAILED
    assert "\n" not in outcome.message and "the skill failed loudly and said more" in outcome.message
    await dispatcher.aclose()  # the server exits: everything it wrote has been forwarded
    for _ in range(100):
        if any("Traceback" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    relayed = [r for r in caplog.records if r.name == "vmware_pilot.skill.aiops"]
    lines = [r.getMessage() for r in relayed]
    assert "fake skill INFO: a line for the log" in lines and "Traceback (most recent call last):" in lines
    assert {r.levelname for r in relayed} == {"DEBUG"}  # a skill's chatter never fills Pilot's log


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_the_skill_server_lists_its_input_schemas(dispatcher: StdioDispatcher) -> None:
    schema = await dispatcher.tool_schema("aiops", "echo")
    assert schema is not None and set(schema["properties"]) == {"value", "vm_name", "password"}
    assert await dispatcher.tool_schema("aiops", "no_such_tool") is None
