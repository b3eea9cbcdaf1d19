"""`vmware-pilot policy check FILE | explain WORKFLOW_ID | import FILE | export [FILE]`.

``check`` reads a policy file as Pilot does at start-up and lists every problem by line (exit 1
when there is one; it needs no settings). ``explain`` says which rules of the policy in force
apply to a workflow's steps and gates, and why. ``import`` stores a checked file as the
database's policy (VMWARE_PILOT_DATABASE_URL set: every replica enforces it); ``export`` writes
the policy in force (the database's, or the file's) to FILE or stdout, which ``import`` takes back
unchanged. Exit 2 when a file cannot be read or the command does not apply to this setup.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from vmware_pilot.cli.common import (
    EXIT_REFUSED,
    EXIT_USAGE,
    JsonOption,
    Output,
    fail,
    open_app,
    operator,
    refuse,
)
from vmware_pilot.cli.refusals import load_settings, starting
from vmware_pilot.cli.style import group
from vmware_pilot.cli.terminal import visible
from vmware_pilot.errors import PilotError
from vmware_pilot.policy.load import read_policy_file
from vmware_pilot.policy.model import PolicyInvalid

__all__ = ["app"]

app = group("Check, explain, import and export the policy (deny, approvals, windows, conflicts).")

FileArg = Annotated[Path, typer.Argument(help="A policy file (YAML; docs/policies.md).")]
WorkflowArg = Annotated[str, typer.Argument(help="The workflow id.")]


def _read(file: Path, json_output: bool) -> Any:
    """The policy in ``file``; exit 2 when it is no file, 1 listing every problem by line."""
    if not file.is_file():
        refuse(f"{file} is not a file", "Give the policy file (YAML; docs/policies.md).", EXIT_USAGE)
    try:
        return read_policy_file(file)
    except PolicyInvalid as exc:
        problems = [{"line": p.line, "where": p.where(), "problem": p.message} for p in exc.problems]
        Output(json_output).result({"ok": False, "file": str(file), "problems": problems})
        if not json_output:
            for p in exc.problems:
                print(visible(f"{file}:{p}"), file=sys.stderr)
        refuse(f"{file}: {len(problems)} problem(s); nothing is enforced from it", "", EXIT_REFUSED)


@app.command()
def check(file: FileArg, json_output: JsonOption = False) -> None:
    """Check a policy file as Pilot does at start-up: exit 0 when usable, 1 listing each problem by line."""
    policy = _read(file, json_output)
    counts = {
        "deny": len(policy.deny),
        "approvals": len(policy.approvals),
        "windows": len(policy.windows),
    }
    out = Output(json_output)
    out.result(
        {
            "ok": True,
            "file": str(file),
            "digest": policy.digest,
            "rules": counts,
            "conflicts": policy.conflicts.mode,
        }
    )
    if not json_output:
        out.show(
            visible(
                f"{file}: usable. {counts['deny']} deny, {counts['approvals']} approval and {counts['windows']} "
                f"window rule(s); conflicts: {policy.conflicts.mode}; digest {policy.digest}"
            )
        )


@app.command()
def explain(workflow_id: WorkflowArg, json_output: JsonOption = False) -> None:
    """Say which rules of the policy in force apply to a workflow's steps and gates, and why."""
    with open_app() as pilot:
        try:
            explained = pilot.service.explain_policy(workflow_id)
        except PilotError as exc:
            fail(exc, json_output)
    out = Output(json_output)
    out.result(explained.payload())
    if json_output:
        return
    lines = [f"Policy {explained.policy_digest[:16]}… applied to workflow {workflow_id}:"]
    for d in explained.denied:
        lines.append(
            f"  DENIED  step {d.step_index} {d.tool}: rule '{d.rule}': {d.reason} ({'; '.join(d.why)})"
        )
    for a in explained.approvals:
        if a.rule is None:
            lines.append(
                f"  gate at step {a.gate_step}: no approval rule applies (the plan's own quorum and expiry)"
            )
        else:
            who = ", ".join(a.approvers) or "any role that may approve"
            valid = a.max_validity_minutes
            lines.append(
                f"  gate at step {a.gate_step}: rule '{a.rule}' (step {a.step_index}: {'; '.join(a.why)}): "
                f"quorum {a.quorum}, approvers {who}, requester may approve: "
                f"{'yes' if a.requester_may_approve else 'no'}"
                + (f", valid {valid:g} min at most" if valid is not None else "")
            )
    for w in explained.windows:
        kind = "blackout" if w.blackout else "change window"
        state = "active now" if w.active_now else "not active now"
        line = f"  step {w.step_index}: {kind} '{w.window}' ({state})"
        if w.open_now is not None:
            line += "; the step may run now" if w.open_now else f"; held until {w.next_opening or 'never'}"
        lines.append(line)
    lines.append(f"  conflicts: {explained.conflicts.mode}")
    for c in explained.conflicts.conflicting:
        lines.append(f"    {c.message if c.has('message') else c.payload()}")
    if explained.says_nothing:
        lines.append("  no deny, approval or window rule applies to this workflow")
    out.show(visible("\n".join(lines)))


@app.command(name="import")
def import_policy(file: FileArg, json_output: JsonOption = False) -> None:
    """Store a policy file as the database's policy (VMWARE_PILOT_DATABASE_URL set), checked first."""
    settings = _settings(json_output)
    if not settings.database_url:
        refuse(
            "policy import needs VMWARE_PILOT_DATABASE_URL: without it the policy is the file "
            f"{settings.resolved_policies_path}",
            "Copy the file there instead (`vmware-pilot policy check FILE` first).",
            EXIT_USAGE,
        )
    _read(file, json_output)
    text = file.read_text(encoding="utf-8")
    with open_app() as pilot:
        assert pilot.policies is not None
        try:
            before = pilot.policies.current().digest
            policy = pilot.policies.put(text, operator().label)
        except PilotError as exc:
            fail(exc, json_output)
    out = Output(json_output)
    out.result(
        {"imported": str(file), "digest": policy.digest, "previous_digest": before, "into": "the database"}
    )
    if not json_output:
        same = " (unchanged)" if before == policy.digest else ""
        out.show(visible(f"Imported {file} into the database: policy digest {policy.digest}{same}."))


@app.command(name="export")
def export_policy(
    file: Annotated[Path | None, typer.Argument(help="Write here (a new file); default: stdout.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Write the policy in force (the database's, or the file's) to FILE or stdout."""
    with open_app() as pilot:
        assert pilot.policies is not None
        text = pilot.policies.text()
        digest = pilot.policies.current().digest
        where = pilot.policies.where
    out = Output(json_output)
    if file is None:
        if json_output:
            out.result({"from": where, "digest": digest, "policy": text})
        else:
            sys.stdout.write(text)
        return
    try:
        with file.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        refuse(f"{file} exists; nothing was written", "Give a new file name.", EXIT_USAGE)
    except OSError as exc:
        refuse(f"{file} cannot be written: {exc.strerror}", "", EXIT_USAGE)
    out.result({"from": where, "digest": digest, "written": str(file)})
    if not json_output:
        print(visible(f"Wrote the policy from {where} to {file} (digest {digest})."), file=sys.stderr)


def _settings(json_output: bool) -> Any:
    try:
        return starting(lambda: load_settings(policy=False))
    except PilotError as exc:
        fail(exc, json_output)
