"""A twin: govmomi's simulator started from a capture on loopback, the state the gate read put on
the objects the plan names, and the environment that starts the companion skills against it alone.

The simulator gets a fresh random account and a bounded memory: its data (heap and thread stacks,
``RLIMIT_DATA``) may not pass ``VMWARE_PILOT_TWIN_MEMORY_MB``, and Go's collector is asked to stay
under four fifths of it (``GOMEMLIMIT``), so a huge capture cannot exhaust the host. Address space
(``RLIMIT_AS``) is not what is bounded: Go reserves about 1 GB of it at start and never uses most.
A simulator that stops (out of memory, or otherwise) is said with the limit in the reason.

The skills get a temporary HOME whose ``~/.vmware-<skill>/config.yaml`` names the twin only (host
127.0.0.1), and an environment without the operator's ``VMWARE_*`` settings, so a rehearsal cannot
reach the real vCenter and the operator's own skill configuration is never read or written.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import os
import re
import resource
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from vmware_pilot.twin.binaries import TwinError, find_binary
from vmware_pilot.twin.captures import Capture

__all__ = ["SKILLS", "Spawn", "Twin", "not_on_a_twin", "simulator_spawn", "start_twin", "stopped_reason"]

# The companion skills that run against a vCenter simulator: each gets a configuration naming the
# twin (``~/.vmware-<skill>/config.yaml``, the layout they share) and is started when a step needs it.
SKILLS: Final = ("monitor", "aiops", "storage")
# What the others need that a vCenter simulator is not: their steps are ``unknown`` on a twin.
_ELSEWHERE: Final = {
    "nsx": "an NSX manager",
    "nsx-security": "an NSX manager",
    "aria": "an Aria Operations server",
    "log-insight": "an Aria Operations for Logs server",
    "avi": "an NSX Advanced Load Balancer controller",
    "vks": "a vSphere Supervisor (the Kubernetes API of vSphere with Tanzu)",
    "vdi": "a Horizon connection server",
    "privateai": "a Private AI Foundation endpoint",
}


def not_on_a_twin(skill: str) -> str:
    """Why ``skill`` cannot run on a twin ("" when it can)."""
    if skill in SKILLS:
        return ""
    needs = _ELSEWHERE.get(skill)
    if needs:
        return f"vmware-{skill} needs {needs}, which a twin (a vCenter simulator) does not have"
    return f"{skill} is not one of the skills a twin starts ({', '.join(SKILLS)})"


_READY: Final = re.compile(r"GOVC_URL=(\S+)")
# The operator's skill settings never reach a twin's skills.
_DROPPED: Final = ("VMWARE_", "GOVC_", "OPS_HOME")
# What Go (and a C runtime) say when memory runs out.
_OUT_OF_MEMORY: Final = re.compile(
    r"out of memory|cannot allocate memory|failed to reserve|pthread_create failed", re.IGNORECASE
)
_MIB: Final = 1024 * 1024


@dataclass(frozen=True)
class Spawn:
    """How the simulator is started: its command line, environment, and the limit set in the child
    before it runs (``preexec``: ``setrlimit(RLIMIT_DATA, (data_bytes, data_bytes))``)."""

    args: tuple[str, ...]
    env: dict[str, str]
    data_bytes: int
    preexec: Callable[[], None] = field(repr=False)


def simulator_spawn(
    binary: str, objects: Path, username: str, password: str, memory_mb: int, base: Mapping[str, str]
) -> Spawn:
    """The simulator's start on ``objects``: loopback, a free port, the twin's account, its data
    bounded to ``memory_mb`` MiB (and Go's soft limit at four fifths of it)."""
    limit = memory_mb * _MIB
    env = {k: v for k, v in base.items() if not k.startswith(_DROPPED) and k != "GOMEMLIMIT"}
    env["GOMEMLIMIT"] = f"{memory_mb * 4 // 5}MiB"
    args = (binary, "-load", str(objects), "-l", "127.0.0.1:0", "-username", username, "-password", password)
    # A C function, so no Python runs in the forked child.
    preexec = functools.partial(resource.setrlimit, resource.RLIMIT_DATA, (limit, limit))
    return Spawn(args, env, limit, preexec)


def stopped_reason(code: int | None, log: str, memory_mb: int) -> str:
    """Why the simulator stopped, naming its memory limit (out of memory or not: it may be why)."""
    tail = " ".join(log.split())[-300:]
    limit = f"VMWARE_PILOT_TWIN_MEMORY_MB ({memory_mb} MB)"
    if _OUT_OF_MEMORY.search(log):
        return f"the simulator ran out of memory under {limit}: {tail}"
    shown = "" if code is None else f" (exit {code})"
    return f"the simulator stopped{shown}; its memory is bounded by {limit}: {tail or 'no message'}"


def _gone(pid: int) -> bool:
    """The process has ended (a zombie not reaped yet, or no longer there), as /proc says it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return Path("/proc/self/stat").exists()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


@dataclass
class Twin:
    """A running twin (stop it with ``stop``): its URL (no credentials), its account, its scratch HOME."""

    url: str
    host: str
    port: int
    username: str
    password: str = field(repr=False)
    home: Path
    target: str
    govc_path: str
    proc: asyncio.subprocess.Process = field(repr=False)
    memory_mb: int = 2048

    def stopped(self) -> str:
        """Why the simulator is no longer running ('' while it runs)."""
        if self.proc.returncode is None and not _gone(self.proc.pid):
            return ""
        try:
            log = (self.home / "vcsim.log").read_text(errors="replace")
        except OSError:
            log = ""
        return stopped_reason(self.proc.returncode, log, self.memory_mb)

    def govc_env(self, base: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if not k.startswith(_DROPPED)}
        env.update(
            GOVC_URL=self.url, GOVC_USERNAME=self.username, GOVC_PASSWORD=self.password, GOVC_INSECURE="1"
        )
        return env

    def skill_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The environment of a companion skill started against the twin."""
        env = {k: v for k, v in base.items() if not k.startswith(_DROPPED)}
        env["HOME"] = str(self.home)
        env[f"VMWARE_{self.target.upper().replace('-', '_')}_PASSWORD"] = self.password
        return env

    async def govc(self, *args: str) -> str:
        """Run govc against the twin (the caller bounds the time: the rehearsal's timeout)."""
        proc = await asyncio.create_subprocess_exec(
            self.govc_path,
            *args,
            env=self.govc_env(os.environ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await proc.communicate()
        except asyncio.CancelledError:
            proc.kill()
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise TwinError(
                f"govc {args[0]} on the twin failed: {' '.join(err.decode(errors='replace').split())[-300:]}"
            )
        return out.decode(errors="replace")

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def _config(target: str, host: str, port: int, username: str) -> str:
    return (
        "targets:\n"
        f"  - name: {target}\n"
        f"    host: {host}\n"
        f"    port: {port}\n"
        f"    username: {username}\n"
        "    type: vcenter\n"
        "    verify_ssl: false\n"
    )


async def start_twin(capture: Capture, *, vcsim: str = "", govc: str = "", memory_mb: int = 2048) -> Twin:
    """Start the simulator on ``capture`` (loopback, a free port, at most ``memory_mb`` MiB of data)
    and prepare the skills' HOME (the caller bounds the time: the rehearsal's timeout)."""
    binary = find_binary("vcsim", vcsim)
    govc_binary = find_binary("govc", govc)
    if not (capture.objects_dir / "0000-ServiceInstance-ServiceInstance.xml").is_file():
        raise TwinError(
            f"capture {capture.id} is not readable (no ServiceInstance in {capture.objects_dir})",
            hint="Capture the target again (`vmware-pilot twin capture`).",
        )
    username, password = "twin", secrets.token_urlsafe(18)
    spawn = simulator_spawn(binary, capture.objects_dir, username, password, memory_mb, os.environ)
    home = Path(tempfile.mkdtemp(prefix="pilot-twin-"))
    log = (home / "vcsim.log").open("wb")
    try:
        proc = await asyncio.create_subprocess_exec(
            *spawn.args,
            env=spawn.env,
            preexec_fn=spawn.preexec,
            stdin=subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
    finally:
        log.close()
    assert proc.stdout is not None
    try:
        line = await proc.stdout.readline()
        found = _READY.search(line.decode(errors="replace"))
        if found is None:
            if proc.returncode is None:
                await proc.wait()  # stdout closed: it stopped, or is stopping
            said = stopped_reason(
                proc.returncode, (home / "vcsim.log").read_text(errors="replace"), memory_mb
            )
            raise TwinError(
                f"the simulator did not start on capture {capture.id}: {said}",
                hint="Raise VMWARE_PILOT_TWIN_MEMORY_MB if it ran out of memory; else capture the "
                "target again, or check VMWARE_PILOT_TWIN_VCSIM.",
            )
        parts = urlsplit(found.group(1))
        host, port = parts.hostname or "", parts.port or 0
        if not ipaddress.ip_address(host).is_loopback:
            raise TwinError(
                f"the simulator listens on {host}, not on loopback", hint="Use a vcsim that honours -l."
            )
        url = f"https://{host}:{port}/sdk"
        for skill in SKILLS:
            folder = home / f".vmware-{skill}"
            folder.mkdir(mode=0o700)
            (folder / "config.yaml").write_text(_config(capture.target, host, port, username))
        return Twin(url, host, port, username, password, home, capture.target, govc_binary, proc, memory_mb)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        shutil.rmtree(home, ignore_errors=True)
        raise
