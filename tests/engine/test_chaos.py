"""Chaos: three `vmware-pilot mcp --transport http --dispatch` replicas on one PostgreSQL, 20
clients running dispatching workflows through them, and a random replica SIGKILLed and restarted
every few seconds. Afterwards: no write started twice and no read more often than the restarts
the audit trail records, no lost update, no workflow left running once the sweepers have continued the dead replicas' runs
(how long that took after the last kill is printed), `audit verify` clean, and every notification
delivered with its own Idempotency-Key. Bounded by construction: 45 s of chaos, then waits with
guards, about 2 minutes in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import text

from tests.support import CHAOS_SKILL
from tests.support.backends import Database
from tests.support.receiver import Receiver, serve
from tests.support.server_proc import PILOT, clean_env
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store
from vmware_pilot.transports.client import connect_http

pytestmark = [pytest.mark.slow, pytest.mark.backends("postgresql")]

SKILL = CHAOS_SKILL
LEASE = 5.0  # VMWARE_PILOT_LEASE_SECONDS of every replica
SWEEP = 1.0  # VMWARE_PILOT_SWEEP_SECONDS
CHAOS_SECONDS = 45.0
CLIENTS = 20
# After the last kill its run lease expires (LEASE), a sweep finds it (SWEEP) and the run walks its
# remaining steps. How long that took is printed as a figure, not asserted (no timed assertions):
# the test only requires that nothing is left running, with a generous guard so a hang fails.
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "go?"}}
_BANNER = re.compile(r"listening on \S+:(\d+);")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PILOT), *args],
        env=clean_env(folder, env),
        cwd=folder,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


@dataclass
class Replica:
    """One replica on a fixed port (so clients find it again after a restart)."""

    home: Path
    env: dict[str, str]
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None
    groups: list[int] = field(default_factory=list)  # every process group started, for cleanup
    kills: int = 0
    ready: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    def start(self) -> None:
        self.ready = False
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as err:
            self.process = subprocess.Popen(
                [str(PILOT), "mcp", "--transport", "http", "--dispatch", "--port", str(self.port)],
                env=clean_env(self.home, self.env),
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        self.groups.append(self.process.pid)
        deadline = time.monotonic() + 60
        while not _BANNER.search(self.log.read_bytes()[offset:].decode(errors="replace")):
            assert self.process.poll() is None, self.log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "a replica did not start within 60 s"
            time.sleep(0.05)
        self.ready = True

    def kill(self) -> None:
        """SIGKILL the replica process only (its skill servers see their stdin close)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.kills += 1

    def cleanup(self) -> None:
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)


@contextlib.contextmanager
def replicas(root: Path, env: dict[str, str]) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        for n in range(3):
            home = root / f"host-{n}"
            home.mkdir()
            started.append(Replica(home, env))
            started[-1].start()
        yield started
    finally:
        for replica in started:
            replica.cleanup()


@dataclass
class Chaos:
    replicas: list[Replica]
    tokens: dict[str, str]
    stop_new: asyncio.Event = field(default_factory=asyncio.Event)
    stop_calls: asyncio.Event = field(default_factory=asyncio.Event)
    workflows: dict[str, str] = field(default_factory=dict)  # workflow id -> client tag
    approvals: list[tuple[str, int, int]] = field(default_factory=list)  # (wid, ran on, approved on)
    approved: set[str] = field(default_factory=set)  # approvals answered without error
    failures: Counter[str] = field(default_factory=Counter)
    last_kill: float = 0.0

    async def call(self, index: int, who: str, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """One tool call on replica ``index`` in a session of its own; None when the replica was
        killed under it (or did not answer in time)."""
        try:
            # A call cut off by a kill may never be answered (the SDK's client waits): give up.
            with anyio.fail_after(30):
                async with connect_http(self.replicas[index].url, self.tokens[who]) as client:
                    reply = await client.call(tool, args)
        except Exception as exc:  # a killed replica: connection refused or reset
            self.failures[f"{tool}: {type(exc).__name__}"] += 1
            await asyncio.sleep(0.5)  # it is restarting: no tight loop of refused connections
            return None
        return reply.payload

    async def client(self, n: int) -> None:
        k = 0
        while not self.stop_new.is_set():
            tag = f"c{n}-{k}"
            k += 1
            steps = [
                {"action": "read", "skill": "monitor", "tool": "get_events", "params": {"tag": f"{tag}-r"}},
                GATE,
                {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": f"{tag}-w"}},
                {"action": "read", "skill": "monitor", "tool": "get_events", "params": {"tag": f"{tag}-r2"}},
            ]
            plan = {"name": tag, "description": "chaos", "steps": steps}
            made = await self.call(random.randrange(3), "alice", "create_workflow", plan)
            if made is None or "workflow_id" not in made:
                continue
            wid = str(made["workflow_id"])
            self.workflows[wid] = tag
            await self.drive(wid)

    async def drive(self, wid: str) -> None:
        """Run the workflow on one replica and approve it on another, until it is terminal."""
        ran_on = random.randrange(3)
        while not self.stop_calls.is_set():
            status = await self.call(
                random.randrange(3), "alice", "get_workflow_status", {"workflow_id": wid}
            )
            state = None if status is None else status.get("state")
            if state == "pending":
                ran_on = random.randrange(3)
                await self.call(ran_on, "alice", "run_workflow", {"workflow_id": wid})
            elif state == "awaiting_approval":
                other = random.choice([i for i in range(3) if i != ran_on])
                self.approvals.append((wid, ran_on, other))
                out = await self.call(other, "bob", "approve", {"workflow_id": wid})
                if out is not None and out.get("approved_by"):
                    self.approved.add(wid)
                ran_on = other
            elif state in ("completed", "failed", "cancelled"):
                return
            else:  # running (here or being continued elsewhere), or the call was cut off
                await asyncio.sleep(0.5)

    async def killer(self) -> None:
        """Every few seconds SIGKILL a random replica that is up, and start it again meanwhile."""
        end = time.monotonic() + CHAOS_SECONDS
        restarts: set[asyncio.Task[None]] = set()
        while time.monotonic() < end:
            await asyncio.sleep(random.uniform(5.0, 8.0))
            up = [r for r in self.replicas if r.process is not None and r.process.poll() is None and r.ready]
            if not up:
                continue
            victim = random.choice(up)
            victim.kill()
            self.last_kill = time.monotonic()
            restarts.add(asyncio.create_task(asyncio.to_thread(victim.start)))
        await asyncio.gather(*restarts)


def _settle(backend_settings: Settings, since: float) -> float:
    """Seconds from ``since`` until no workflow is running (polled; bounded by the test's wall time)."""
    store = open_store(backend_settings)
    try:
        while True:
            states = Counter(str(s["state"]) for s in store.workflows.list_all(limit=1000))
            if not states["running"] and not states["rolling_back"]:
                return time.monotonic() - since
            assert time.monotonic() - since < 60, f"workflows still running: {states}"
            time.sleep(0.1)
    finally:
        store.close()


async def test_replicas_killed_at_random_lose_nothing_run_no_write_twice_and_settle(
    database: Database, tmp_path: Path
) -> None:
    began = time.monotonic()
    log = tmp_path / "skill-calls.log"
    log.touch()
    operator = tmp_path / "operator"
    operator.mkdir()
    base = {"VMWARE_PILOT_DATABASE_URL": database.raw_url}
    tokens = {}
    for name in ("alice", "bob"):
        made = _cli(operator, base, "token", "create", name)
        assert made.returncode == 0, made.stderr
        tokens[name] = made.stdout.strip()
    skill = shlex.join([sys.executable, str(SKILL)])
    with serve(Receiver()) as receiver:
        env = {
            **base,
            "VMWARE_PILOT_LEASE_SECONDS": str(LEASE),
            "VMWARE_PILOT_SWEEP_SECONDS": str(SWEEP),
            "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"monitor": skill, "aiops": skill}),
            "VMWARE_PILOT_NOTIFY_URL": receiver.url,
            "VMWARE_PILOT_NOTIFY_TIMEOUT": "2",
            "VMWARE_PILOT_NOTIFY_ATTEMPTS": "10",
            "CHAOS_LOG": str(log),
        }
        with replicas(tmp_path, env) as started:
            chaos = Chaos(started, tokens)
            clients = [asyncio.create_task(chaos.client(n)) for n in range(CLIENTS)]
            await chaos.killer()
            chaos.stop_new.set()
            chaos.stop_calls.set()  # no new client call after the chaos: what is left is the sweepers'
            settings = Settings(home=operator / ".vmware", database_url=database.raw_url)
            settled_after = await asyncio.to_thread(_settle, settings, chaos.last_kill)
            await asyncio.wait_for(asyncio.gather(*clients), 90)
            verify = _cli(operator, base, "audit", "verify")
            store = open_store(settings)
            try:
                deadline = time.monotonic() + 60  # every outbox row delivered (guard, not a timing claim)
                while store.outbox.notice_counts().get("pending"):
                    assert time.monotonic() < deadline, f"notifications left: {store.outbox.notice_counts()}"
                    await asyncio.sleep(0.2)
                records = {
                    wid: store.workflows.load(wid)
                    for wid in (s["id"] for s in store.workflows.list_all(limit=1000))
                }
            finally:
                store.close()
            with database.raw() as conn:
                outbox = {
                    str(r[0]): str(r[1])
                    for r in conn.execute(text("SELECT event_id, body FROM notifications"))
                }
            logs = [r.log.read_text(errors="replace") for r in started]
    wall = time.monotonic() - began
    kills = sum(r.kills for r in started)
    lines = [line.split()[:3] for line in log.read_text().splitlines()]
    starts = Counter((tool, key) for what, tool, key in lines if what == "start")
    ends = {(tool, key) for what, tool, key in lines if what == "end"}
    states = Counter(wf.state.value for wf in records.values())
    summary = (
        f"{len(records)} workflows {dict(states)}, {kills} kills, {len(starts)} steps started, "
        f"{len(chaos.approvals)} approval calls, client call failures {dict(chaos.failures)}, "
        f"settled {settled_after:.1f} s after the last kill, wall {wall:.0f} s"
    )
    print(summary)
    assert kills >= 5 and len(records) >= CLIENTS, summary
    assert all(ran != approved for _, ran, approved in chaos.approvals)
    restarted = 0
    for wid, wf in records.items():
        actions = [(e.action, e.detail) for e in wf.audit_log]
        for step in wf.steps:
            if step.is_gate:
                continue
            key = (step.tool, str(step.params.get("tag") or step.params.get("vm_name")))
            again = sum(
                1 for a, d in actions if a == "read_step_restarted" and d.startswith(f"Step {step.index}:")
            )
            restarted += again
            if step.tool == "power_on_vm":
                assert starts[key] <= 1, f"write {key} of {wid} started {starts[key]} times"
            else:
                assert starts[key] <= 1 + again, (
                    f"read {key} of {wid} started {starts[key]} times, {again} restarts"
                )
            # No lost update: what the skill did is recorded, and nothing is recorded that it did not do.
            if step.status.value == "success":
                assert starts[key] >= 1, f"{wid} step {step.index} recorded success, never called"
            if key in ends and step.tool == "power_on_vm":
                assert step.status.value in ("success", "interrupted"), (wid, step.index, step.status)
        if wid in chaos.approved:
            assert wf.approved_by == "token:bob" and "approved" in [a for a, _ in actions], wid
    assert not [wf.id for wf in records.values() if wf.state.value in ("running", "rolling_back")]
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # Notifications: every outbox event arrived, each key names one event only.
    bodies: dict[str, set[bytes]] = {}
    for got in receiver.received:
        bodies.setdefault(got.headers["Idempotency-Key"], set()).add(got.body)
    assert set(outbox) <= set(bodies), "an event never arrived"
    assert all(len(b) == 1 for b in bodies.values()), "one Idempotency-Key for two events"
    for key, (body,) in ((k, tuple(v)) for k, v in bodies.items()):
        assert json.loads(body)["event_id"] == key
    announced = {(json.loads(b)["workflow_id"], json.loads(b)["event"]) for b in outbox.values()}
    for wid, wf in records.items():
        if wf.state.value in ("completed", "failed", "awaiting_approval"):
            assert (wid, wf.state.value) in announced, (wid, wf.state.value)
    assert not re.findall(r"(?:ERROR|CRITICAL) vmware_pilot.*", "".join(logs))
