"""The lab: govmomi's vCenter simulator plus the real companion skills, for tests and benches.

``bash scripts/lab/setup.sh`` builds it under ``.lab/``. :func:`running_lab` starts the
simulator on a free loopback port, writes the companions' configs into a scratch HOME and
yields a :class:`Lab` whose ``env`` is what a companion server (or a dispatching Pilot) needs.
The simulator is stopped by pid when the context ends.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import PaginatedRequestParams, TextContent

__all__ = [
    "COMPANIONS",
    "COMPANIONS_BIN",
    "LAB_DIR",
    "SETUP_COMMAND",
    "TARGET",
    "VCSIM",
    "CompanionAnswer",
    "Lab",
    "LabNotBuilt",
    "Simulator",
    "call_companion",
    "list_companion_tools",
    "missing_parts",
    "power_state",
    "running_lab",
]

REPO = Path(__file__).resolve().parents[2]
LAB_DIR = REPO / ".lab"
VCSIM = LAB_DIR / "bin" / "vcsim-lab"
COMPANIONS_BIN = LAB_DIR / "companions" / "bin"
COMPANIONS = ("monitor", "aiops", "storage")  # scripts/lab/companions.txt
SETUP_COMMAND = "bash scripts/lab/setup.sh"
# The companions' target name; its password is read from VMWARE_LAB_PASSWORD.
TARGET = "lab"


@dataclass(frozen=True)
class CompanionAnswer:
    """One tool answer: ``data`` is the parsed JSON (or the text when it is not JSON)."""

    is_error: bool
    data: Any
    text: str


class LabNotBuilt(RuntimeError):
    """The lab binaries are missing: the message says to run the setup script."""


@dataclass(frozen=True)
class Simulator:
    """The running simulator as its ready line describes it."""

    url: str
    host: str
    port: int
    username: str
    password: str
    pid: int


@dataclass(frozen=True)
class Lab:
    """A running lab: ``env`` starts a companion server against the simulator."""

    simulator: Simulator
    home: Path
    bin_dir: Path
    env: dict[str, str]
    _proc: subprocess.Popen[bytes] = field(repr=False, compare=False)

    def set_delay(self, soap_method: str, ms: int) -> None:
        """Make the simulator sleep ``ms`` before serving ``soap_method`` (e.g. PowerOffVM_Task); 0 clears.

        The call still takes effect after the sleep, even when its caller has gone.
        """
        assert self._proc.stdin is not None
        self._proc.stdin.write(f"delay {soap_method} {int(ms)}\n".encode())
        self._proc.stdin.flush()
        answer = json.loads(_read_line(self._proc, 10.0) or b"{}")
        if not answer.get("ok"):
            raise RuntimeError(f"the simulator refused the delay: {answer}")

    def command(self, skill: str) -> str:
        """Absolute path of ``vmware-<skill>-mcp`` in the lab venv."""
        return str(self.bin_dir / f"vmware-{skill}-mcp")


def missing_parts() -> list[str]:
    """What of the lab is not built (empty when it is ready)."""
    wanted = [VCSIM, *(COMPANIONS_BIN / f"vmware-{skill}-mcp" for skill in COMPANIONS)]
    return [str(p.relative_to(REPO)) for p in wanted if not os.access(p, os.X_OK)]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            break
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    return line


def _start_simulator(workdir: Path, timeout: float) -> tuple[subprocess.Popen[bytes], Simulator]:
    log_path = workdir / "vcsim.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(VCSIM)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=workdir
        )
    line = _read_line(proc, timeout)
    try:
        info = json.loads(line)
        sim = Simulator(
            url=info["url"],
            host=info["host"],
            port=int(info["port"]),
            username=info["username"],
            password=info["password"],
            pid=proc.pid,
        )
    except (ValueError, KeyError, TypeError):
        _stop(proc)
        tail = log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(
            f"the simulator did not report ready within {timeout} s: {line!r}\n{tail}"
        ) from None
    return proc, sim


def _companion_config(sim: Simulator) -> str:
    return (
        "targets:\n"
        f"  - name: {TARGET}\n"
        f"    host: {sim.host}\n"
        f"    port: {sim.port}\n"
        f"    username: {sim.username}\n"
        "    type: vcenter\n"
        "    verify_ssl: false\n"
    )


def _write_configs(home: Path, sim: Simulator) -> None:
    for skill in COMPANIONS:
        folder = home / f".vmware-{skill}"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        (folder / "config.yaml").write_text(_companion_config(sim))


def _companion_env(home: Path, sim: Simulator, base: Mapping[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in base.items()
        # Keep Pilot's own settings and any outside companion config out of the lab.
        if not k.startswith(
            ("VMWARE_PILOT_", "VMWARE_MONITOR_", "VMWARE_AIOPS_", "VMWARE_STORAGE_", "OPS_HOME")
        )
    }
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(COMPANIONS_BIN), base.get("PATH", os.defpath)])
    env[f"VMWARE_{TARGET.upper()}_PASSWORD"] = sim.password
    return env


@contextmanager
def running_lab(workdir: Path, *, start_timeout: float = 60.0) -> Iterator[Lab]:
    """Start the simulator and prepare a scratch HOME under ``workdir``; stop it on exit."""
    missing = missing_parts()
    if missing:
        raise LabNotBuilt(
            f"the lab is not built (missing: {', '.join(missing)}); run `{SETUP_COMMAND}` first"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    proc, sim = _start_simulator(workdir, start_timeout)
    try:
        home = workdir / "home"
        _write_configs(home, sim)
        yield Lab(sim, home, COMPANIONS_BIN, _companion_env(home, sim, os.environ), proc)
    finally:
        _stop(proc)


async def call_companion(lab: Lab, skill: str, tool: str, arguments: Mapping[str, Any]) -> CompanionAnswer:
    """Call one tool of a lab companion in a fresh MCP stdio session; the answer, parsed."""
    params = StdioServerParameters(command=lab.command(skill), args=[], env=lab.env, cwd=str(lab.home))
    with (lab.home / f"{skill}.stderr.log").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(tool, dict(arguments))
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.structured_content is not None:
        data: Any = result.structured_content
        if isinstance(data, dict) and set(data) == {"result"}:
            data = data["result"]
    else:
        try:
            data = json.loads(texts[0]) if len(texts) == 1 else texts
        except ValueError:
            data = texts[0]
    return CompanionAnswer(is_error=bool(result.is_error), data=data, text="\n".join(texts))


async def list_companion_tools(lab: Lab, skill: str) -> dict[str, Any]:
    """One companion's entry of ``tests/data/companion-tools.json``, read from its running server.

    ``{"server": "vmware-<skill>-mcp", "version": ..., "tools": [{name, description, inputSchema,
    annotations}, ...]}`` with the tools in the server's order; the server is named without its
    folder so the snapshot is the same on every machine.
    """
    params = StdioServerParameters(command=lab.command(skill), args=[], env=lab.env, cwd=str(lab.home))
    tools: list[dict[str, Any]] = []
    with (lab.home / f"{skill}.stderr.log").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            cursor: str | None = None
            while True:
                page = await session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                for tool in page.tools:
                    annotations = tool.annotations
                    tools.append(
                        {
                            "name": tool.name,
                            "description": tool.description or "",
                            "inputSchema": tool.input_schema,
                            "annotations": annotations.model_dump(
                                mode="json", by_alias=True, exclude_none=True
                            )
                            if annotations
                            else {},
                        }
                    )
                if not page.next_cursor:
                    break
                cursor = page.next_cursor
    return {"server": f"vmware-{skill}-mcp", "version": init.server_info.version, "tools": tools}


async def power_state(lab: Lab, vm_name: str) -> str:
    """A VM's power state (``poweredOn`` / ``poweredOff`` / ``suspended``) read through vmware-monitor."""
    answer = await call_companion(lab, "monitor", "get_vm_info", {"vm_name": vm_name})
    if answer.is_error or not isinstance(answer.data, dict):
        raise AssertionError(f"get_vm_info({vm_name!r}) failed: {answer.text}")
    return str(answer.data["power_state"])


# A person at vCenter, not Pilot nor a companion: the companions' Python has pyVmomi.
_AT_VCENTER = r"""
import sys
from pyVim.connect import Disconnect, SmartConnect
from pyVim.task import WaitForTask
from pyVmomi import vim
host, port, user, pwd, action, name, new_name = sys.argv[1:8]
si = SmartConnect(host=host, port=int(port), user=user, pwd=pwd, disableSslCertValidation=True)
try:
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    vm = next(v for v in view.view if v.name == name)
    if action == "rename":
        WaitForTask(vm.Rename_Task(new_name))
    elif action == "power_off":
        WaitForTask(vm.PowerOffVM_Task())
    elif action == "destroy":
        if vm.runtime.powerState == "poweredOn":
            WaitForTask(vm.PowerOffVM_Task())
        WaitForTask(vm.Destroy_Task())
    else:
        sys.exit(f"unknown action {action!r}")
finally:
    Disconnect(si)
"""


def at_vcenter(lab: Lab, action: str, vm_name: str, new_name: str = "-") -> None:
    """Change the simulator's VM ``vm_name`` directly, as a person at vCenter would, behind Pilot's
    back: ``power_off`` (hard), ``rename`` (to ``new_name``) or ``destroy`` (powered off first)."""
    sim = lab.simulator
    args = [sim.host, str(sim.port), sim.username, sim.password, action, vm_name, new_name]
    done = subprocess.run(
        [str(COMPANIONS_BIN / "python"), "-c", _AT_VCENTER, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
