"""`vmware-pilot run`: create a workflow from a template (or a steps file) and run it from a terminal.

Progress is printed as the run goes. At each approval gate the person at the terminal sees what
the gate releases and decides; their approval is recorded as theirs (the OS user), bound to the
plan digest shown. Without dispatch (hand-back mode) Pilot runs nothing: it prints the steps to
perform, and approving a gate after handed-out steps states that they were performed. With
`--dispatch` (or VMWARE_PILOT_DISPATCH=stdio) Pilot runs the steps in each skill's own server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from vmware_pilot.cli import views
from vmware_pilot.cli.common import (
    EXIT_USAGE,
    JsonOption,
    Output,
    fail,
    open_app,
    operator,
    refuse,
    run_async,
)
from vmware_pilot.cli.operator import printer
from vmware_pilot.cli.terminal import ask, visible
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.approvals import Declined
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, FromTemplateRequest, RunRequest
from vmware_pilot.errors import AlreadyApproved, PilotError
from vmware_pilot.results import RunResult
from vmware_pilot.templates.yamlsafe import YamlRefused, load_yaml

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = ["parse_params", "run"]


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; a value that reads as JSON (number, true, list, object) is taken as such."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            refuse(f"-p {pair!r} is not key=value", "Example: -p vm_name=web-01 -p cpu=4", EXIT_USAGE)
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        params[key.strip()] = value
    return params


def _load_steps(path: Path) -> tuple[str, str, list[Any]]:
    try:
        doc = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        refuse(
            f"cannot read {path}: {exc.strerror or exc}", "Give a YAML file with a list of steps.", EXIT_USAGE
        )
    except (UnicodeDecodeError, YamlRefused) as exc:
        problem = exc if isinstance(exc, YamlRefused) else "not UTF-8 text"
        refuse(f"cannot read {path}: {problem}", "Give a YAML file with a list of steps.", EXIT_USAGE)
    name, description = path.stem, f"steps from {path.name}"
    if isinstance(doc, dict):
        name = str(doc.get("name") or name)
        description = str(doc.get("description") or description)
        doc = doc.get("steps")
    if not isinstance(doc, list) or not doc:
        refuse(
            f"{path} holds no steps",
            "The file is a list of steps, or a mapping with name, description and steps.",
            EXIT_USAGE,
        )
    return name, description, doc


def _create(
    app: PilotApp, person: Actor, template: str | None, params: dict[str, Any], steps: Path | None
) -> str:
    if steps is not None:
        name, description, items = _load_steps(steps)
        return app.service.create_workflow(
            CreateRequest(person, name, description, items, door="cli")
        ).workflow_id
    assert template is not None
    return app.service.create_workflow_from_template(
        FromTemplateRequest(person, template, params, door="cli")
    ).workflow_id


async def _drive(
    app: PilotApp, person: Actor, workflow_id: str, force: bool, yes: bool, out: Output
) -> RunResult:
    """Run, and at each gate ask the person; returns the last result."""
    result: RunResult = await app.service.run_workflow(
        RunRequest(person, workflow_id, force, door="cli"), progress=printer(out)
    )
    while result.is_at_gate:
        out.show(views.outcome_panel(result))
        # The gate as stored, its decision summary and what the person may do: one prediction.
        page = await app.service.gate_page(person, workflow_id, None, "cli", read_again=False)
        view = page.view
        out.show(views.gate_panel(view))
        if page.decision is not None and page.may is not None:
            out.show(views.decision_panel(page.decision, page.may))
        gate = view.pending()
        assert gate is not None  # pending_gate refuses a workflow at no gate
        unrun = view.not_executed_before_gate
        if unrun and yes:
            return result  # --yes cannot state that steps printed a moment ago were performed
        question = f"Approve this gate as {person.label}?"
        if unrun:
            question = (
                f"Did you perform the {len(unrun)} step(s) listed above and check their results, "
                f"and do you approve this gate as {person.label}?"
            )

        async def asked(question: str = question) -> bool:  # after the engine's own checks
            return yes or (sys.stdin.isatty() and ask(question, err=out.json_mode))

        request = ApproveRequest(
            person,
            workflow_id,
            door="cli",
            approver=person.label,
            acknowledge_not_executed=bool(unrun),
            expected_digest=gate.digest,
            gate_step=gate.index,
        )
        try:
            result = await app.service.approve(request, progress=printer(out), confirm=asked)
        except (AlreadyApproved, Declined):
            # This person already approved (others still have to), or nobody to ask, or the
            # person said no: the workflow waits at the gate.
            return result
        pending = result.pending_gate
        if result.is_at_gate and pending is not None and pending.index == gate.index:
            out.show(views.outcome_panel(result))
            return result  # a quorum gate: more people have to approve
    return result


def run(
    template: Annotated[str | None, typer.Argument(help="Template name (`vmware-pilot templates`).")] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Template parameter key=value (repeatable).")
    ] = None,
    steps: Annotated[
        Path | None,
        typer.Option("--steps", help="YAML file of steps (a custom workflow) instead of a template."),
    ] = None,
    dispatch: Annotated[
        bool, typer.Option("--dispatch", help="Let Pilot run each step in that skill's own MCP server.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Run a built-in despite blocking review findings (you checked them)."),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Approve gates as yourself without asking (not one that follows steps handed to you).",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Create a workflow and run it here: progress, and each approval gate asked at this terminal."""
    if (template is None) == (steps is None):
        refuse(
            "give a template name or --steps FILE.yaml (one of them)",
            "`vmware-pilot templates` lists templates.",
            EXIT_USAGE,
        )
    if steps is not None and param:
        refuse(
            "-p parameters go with a template, not with --steps",
            "Put the values in the steps file.",
            EXIT_USAGE,
        )
    params = parse_params(param or [])
    out = Output(json_output)
    person = operator()
    with open_app(dispatch) as app:
        try:
            workflow_id = _create(app, person, template, params, steps)
            mode = "Pilot runs the steps" if app.dispatcher is not None else "steps are handed back to you"
            out.show(Text.assemble("Created ", (visible(workflow_id), "bold"), f" ({mode})."))
            result = run_async(app, _drive(app, person, workflow_id, force, yes, out))
        except PilotError as exc:
            fail(exc, json_output)
    out.result(result.payload())
    if not json_output:
        if not result.is_at_gate:  # a gate's result was shown with the gate
            out.show(views.outcome_panel(result))
        if result.is_at_gate:
            ack = " --ack-not-executed" if result.pending_dispatch else ""
            out.show(
                Text(
                    visible(
                        f"It waits at the gate. Approve with `vmware-pilot approve {workflow_id}{ack}`, "
                        f"or reject with `vmware-pilot reject {workflow_id} --reason ...`."
                    )
                )
            )
        elif result.is_dispatch_required:
            out.show("Perform the steps above yourself, in order; Pilot did not run them.")
    if result.is_refusal:
        raise typer.Exit(1)
