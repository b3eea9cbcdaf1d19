"""A twin: govmomi's simulator started from a capture on loopback, the state the gate read put on
the objects the plan names, and the environment that starts the companion skills against it alone.

The simulator gets a fresh random account; the skills get a temporary HOME whose
``~/.vmware-<skill>/config.yaml`` names the twin only (host 127.0.0.1), and an environment without
the operator's ``VMWARE_*`` settings, so a rehearsal cannot reach the real vCenter and the operator's
own skill configuration is never read or written.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from vmware_pilot.twin.binaries import TwinError, find_binary
from vmware_pilot.twin.captures import Capture

__all__ = ["SKILLS", "Twin", "start_twin"]

SKILLS: Final = ("monitor", "aiops")
_READY: Final = re.compile(r"GOVC_URL=(\S+)")
# The operator's skill settings never reach a twin's skills.
_DROPPED: Final = ("VMWARE_", "GOVC_", "OPS_HOME")


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

    async def set_power(self, vm: str, state: str) -> None:
        """Put the state the gate read on the twin's VM: ``poweredOn`` or ``poweredOff``."""
        flag = {"poweredOn": "-on", "poweredOff": "-off"}.get(state)
        if flag is not None:
            await self.govc("vm.power", flag, "-force", vm)

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


async def start_twin(capture: Capture, *, vcsim: str = "", govc: str = "") -> Twin:
    """Start the simulator on ``capture`` (loopback, a free port) and prepare the skills' HOME (the
    caller bounds the time: the rehearsal's timeout)."""
    binary = find_binary("vcsim", vcsim)
    govc_binary = find_binary("govc", govc)
    if not (capture.objects_dir / "0000-ServiceInstance-ServiceInstance.xml").is_file():
        raise TwinError(
            f"capture {capture.id} is not readable (no ServiceInstance in {capture.objects_dir})",
            hint="Capture the target again (`vmware-pilot twin capture`).",
        )
    username, password = "twin", secrets.token_urlsafe(18)
    home = Path(tempfile.mkdtemp(prefix="pilot-twin-"))
    log = (home / "vcsim.log").open("wb")
    try:
        proc = await asyncio.create_subprocess_exec(
            binary,
            "-load",
            str(capture.objects_dir),
            "-l",
            "127.0.0.1:0",
            "-username",
            username,
            "-password",
            password,
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
            raise TwinError(
                f"the simulator did not start on capture {capture.id}: "
                + " ".join((home / "vcsim.log").read_text(errors="replace").split())[-300:],
                hint="Capture the target again, or check VMWARE_PILOT_TWIN_VCSIM.",
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
        return Twin(url, host, port, username, password, home, capture.target, govc_binary, proc)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        shutil.rmtree(home, ignore_errors=True)
        raise
