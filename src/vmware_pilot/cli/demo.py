"""`vmware-pilot demo`: start `vmware-pilot mcp` as an MCP client would and walk one template.

create → review → run (steps handed back) → approval gate → approve with acknowledgement →
status → rollback preview, each printed readably. It uses a throw-away pilot home unless
``--home`` is given, so it never touches the user's workflows by surprise, and it passes its server
none of the ``VMWARE_PILOT_*`` settings but the log level (saying which it ignored): a database URL,
a webhook or dispatch exported for real use never reach the demo.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TextIO, TypeVar

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vmware_pilot.cli.terminal import console as terminal_console
from vmware_pilot.cli.terminal import json_text, visible
from vmware_pilot.config import ENV_PREFIX
from vmware_pilot.results import (
    ApproveResult,
    BlastRadius,
    FromTemplateResult,
    Handout,
    PlannedStep,
    Preview,
    RecordStep,
    Refusal,
    Result,
    ReviewResult,
    RunResult,
    StatusView,
    StepRef,
)

__all__ = ["DEMO_PARAMS", "DEMO_TEMPLATE", "demo"]

DEMO_TEMPLATE = "incident_response"
DEMO_PARAMS: dict[str, Any] = {
    "alert_entity": "web-01",
    "alert_name": "High CPU usage",
    "target": "lab-vcenter",
}
DEMO_APPROVER = "demo-operator"
R = TypeVar("R", bound=Result)


class DemoFailed(Exception):
    """A step of the demo did not answer as expected."""


class _Walk:
    """Calls tools in order, printing each answer (or collecting it for --json)."""

    def __init__(self, client: Any, console: Console, json_mode: bool) -> None:
        self.client = client
        self.console = console
        self.json_mode = json_mode
        self.record: list[dict[str, Any]] = []

    async def call(self, title: str, tool: str, arguments: Mapping[str, Any], model: type[R]) -> R:
        """The tool's answer as its typed result (``vmware_pilot.results``)."""
        return model.model_validate(await self.answer(title, tool, arguments))

    async def answer(
        self, title: str, tool: str, arguments: Mapping[str, Any], *, expect_error: bool = False
    ) -> dict[str, Any]:
        """The tool's answer as the JSON object it sent (a refusal has no model of its own)."""
        reply = await self.client.call(tool, arguments)
        self.record.append(
            {
                "step": title,
                "tool": tool,
                "arguments": dict(arguments),
                "isError": reply.is_error,
                "result": reply.payload,
            }
        )
        if reply.is_error != expect_error:
            raise DemoFailed(f"{tool} answered {json.dumps(reply.payload, ensure_ascii=False)[:2000]}")
        payload: dict[str, Any] = reply.payload
        return payload

    def show(self, title: str, body: Any, style: str = "cyan") -> None:
        if not self.json_mode:
            self.console.print(Panel(body, title=title, title_align="left", border_style=style))


def _steps_table(steps: Sequence[PlannedStep | RecordStep]) -> Table:
    with_status = any(isinstance(step, RecordStep) for step in steps)
    table = Table(show_edge=False, pad_edge=False)
    for column in ("#", "action", "skill.tool", *(("status",) if with_status else ())):
        table.add_column(column)
    for step in steps:
        gate = step.is_gate
        row = [
            str(step.index),
            "[bold yellow]approval gate[/]" if gate else step.action,
            f"{step.skill}.{step.tool}",
        ]
        if isinstance(step, RecordStep):
            row.append(step.status)
        table.add_row(*row)
    return table


def _pending_table(pending: Sequence[Handout]) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("#", "skill.tool", "params"):
        table.add_column(column)
    for step in pending:
        params = json.dumps(step.params, ensure_ascii=False)
        table.add_row(str(step.index), f"{step.skill}.{step.tool}", params)
    return table


def _blast_table(radius: BlastRadius) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("list")
    table.add_column("count", justify="right")
    table.add_column("steps")
    for key in (
        "would_roll_back",
        "left_in_place",
        "not_reversed_by_pilot",
        "not_reversible_outside_pilot",
        "unknown_effects",
    ):
        entries: list[StepRef] = getattr(radius, key)
        names = ", ".join(f"{e.index}:{e.skill}.{e.tool}" for e in entries) or "-"
        count = getattr(radius, f"{key}_count") if radius.has(f"{key}_count") else len(entries)
        table.add_row(key, str(count), names)
    for problems, key in ((radius.blockers, "blockers"), (radius.unmeasured, "unmeasured")):
        table.add_row(key, str(len(problems)), "; ".join(problems) or "-")
    return table


async def _walk(walk: _Walk) -> None:
    created = await walk.call(
        "create",
        "create_workflow_from_template",
        {"workflow_type": DEMO_TEMPLATE, "params": DEMO_PARAMS},
        FromTemplateResult,
    )
    wf_id = created.workflow_id
    walk.show(
        f"1. create_workflow_from_template({DEMO_TEMPLATE})",
        Group(Text(f"→ {wf_id}, state {created.state}\n"), _steps_table(created.steps)),
    )

    review = await walk.call("review", "review_workflow", {"workflow_id": wf_id}, ReviewResult)
    counts = ", ".join(f"{k}={v}" for k, v in review.summary.payload().items())
    findings = "\n".join(f"• [{f.severity}] {f.kind} @ step {f.step_index}" for f in review.findings)
    walk.show(f"2. review_workflow → verdict {review.verdict}", f"{counts}\n{findings or 'no findings'}")

    run = await walk.call("run", "run_workflow", {"workflow_id": wf_id}, RunResult)
    walk.show(
        f"3. run_workflow → outcome {run.outcome}, state {run.state}",
        _pending_table(run.pending_dispatch),
    )
    walk.show(
        "Pilot ran nothing (started without --dispatch)",
        "pending_dispatch lists the steps the agent performs itself, in order. The run stopped at "
        "the approval gate: a human must agree before the remediation step.",
        style="dim",
    )

    refused = Refusal.model_validate(
        await walk.answer(
            "approve (refused)",
            "approve",
            {"workflow_id": wf_id, "approver": DEMO_APPROVER},
            expect_error=True,
        )
    )
    unrun = ", ".join(f"step {s.index} ({s.skill}.{s.tool})" for s in refused.not_executed_before_gate or [])
    walk.show(
        "4. approve without acknowledgement → refused",
        f"{refused.error}\n\nnot_executed_before_gate: {unrun}",
        style="red",
    )

    approved = await walk.call(
        "approve",
        "approve",
        {"workflow_id": wf_id, "approver": DEMO_APPROVER, "acknowledge_not_executed": True},
        ApproveResult,
    )
    walk.show(
        f"5. approve(acknowledge_not_executed=true) → outcome {approved.outcome}",
        Group(
            Text(
                f"Approved by {DEMO_APPROVER}. Steps 0-1 are recorded reported_done; the remediation "
                "after the gate is handed out now, and the workflow stays pending: without --dispatch "
                "Pilot never calls it completed.\n"
            ),
            _pending_table(approved.pending_dispatch),
        ),
        style="green",
    )

    status = await walk.call("status", "get_workflow_status", {"workflow_id": wf_id}, StatusView)
    log = "\n".join(f"{e.action}: {e.detail}".rstrip(": ") for e in status.audit_log)
    diff = status.diff_report  # free-form (engine.diff)
    walk.show(
        f"6. get_workflow_status → state {status.state}",
        Group(
            _steps_table(status.steps),
            Text(f"\ndiff_report: {diff.get('summary', '(empty)')}", style="dim"),
        ),
    )
    walk.show("audit log", log or "(empty)", style="dim")

    preview = await walk.call("rollback preview", "rollback", {"workflow_id": wf_id}, Preview)
    radius = preview.blast_radius
    notes = [n for n in (radius.left_in_place_note, radius.not_reversible_outside_pilot_note) if n]
    walk.show(
        f"7. rollback (preview, action {preview.action}) — nothing changed",
        Group(_blast_table(radius), *(Text(f"\n{n}", style="dim") for n in notes)),
        style="magenta",
    )


def _root_cause(exc: BaseException) -> str:
    """The first leaf of an exception group (task groups wrap what went wrong)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, DemoFailed) else str(exc)


# The settings the demo keeps: its home (set to the demo's own) and how much its server logs.
OWNED = frozenset({f"{ENV_PREFIX}HOME", f"{ENV_PREFIX}LOG_LEVEL"})


def _cleared() -> list[str]:
    """The ``VMWARE_PILOT_*`` variables of this environment the demo does not pass on: a database,
    a webhook, dispatch to the real skills, a token store… would each reach the user's systems."""
    return sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and k not in OWNED)


def _child_env(home: Path) -> dict[str, str]:
    """The demo server's whole environment: this one without the Pilot settings the demo does
    not own, plus the demo home."""
    dropped = set(_cleared())
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env[f"{ENV_PREFIX}HOME"] = str(home)
    return env


@contextmanager
def _home(given: Path | None) -> Iterator[Path]:
    if given is not None:
        yield given.expanduser()
        return
    with tempfile.TemporaryDirectory(prefix="vmware-pilot-demo-") as tmp:
        yield Path(tmp) / "pilot"


async def _run(home: Path, console: Console, json_mode: bool, errlog: TextIO) -> list[dict[str, Any]]:
    from vmware_pilot.transports.client import connect_stdio, server_command

    command, args = server_command()
    env = _child_env(home)
    async with connect_stdio(command, args, env=env, errlog=errlog, inherit_env=False) as client:
        walk = _Walk(client, console, json_mode)
        if not json_mode:
            console.print(
                f"[bold]{client.server_name} {client.server_version}[/] started over stdio "
                f"([dim]{command} {' '.join(args)}[/]), pilot home [dim]{home}[/]\n"
            )
        try:
            await _walk(walk)
        finally:
            if json_mode:
                print(json_text(walk.record))
    return walk.record


def demo(
    home: Annotated[
        Path | None,
        typer.Option(help="Pilot home to use instead of a throw-away one (keeps the demo workflow)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the raw tool results as JSON.")] = False,
) -> None:
    """Walk a built-in template through the MCP server: review, run, gate, approve, status, rollback preview."""
    console = terminal_console()
    cleared = _cleared()
    if cleared:
        # Said on stderr in --json mode too, where stdout carries only the record.
        note = terminal_console(stderr=True) if json_output else console
        note.print(
            Text.assemble(
                "The demo stands alone: it ignores ",
                visible(", ".join(cleared)),
                " (its server uses only the demo home, no database, webhook or skills of yours).\n",
                style="dim",
            )
        )
    with _home(home) as pilot_home, tempfile.TemporaryFile(mode="w+") as errlog:
        try:
            asyncio.run(_run(pilot_home, console, json_output, errlog))
        except Exception as exc:
            errlog.seek(0)
            server_log = errlog.read()[-4000:]
            console.print(Text.assemble(("demo failed:", "red"), " ", visible(_root_cause(exc))))
            if server_log:
                sys.stderr.write(f"--- server log ---\n{server_log}\n")
            raise typer.Exit(1) from None
    if not json_output:
        console.print(
            "\nThat is the hand-back flow. Add it to an MCP client with "
            "[bold]claude mcp add vmware-pilot -- vmware-pilot mcp[/] (see the README)."
        )
