"""The README starts with the product and its claims hold: checked against the files it links and
against the command line itself (issue 28: "every claim true")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from vmware_pilot.cli.commands import app, load_command
from vmware_pilot.cli.index import COMMANDS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
DOCS = sorted((REPO / "docs").glob("*.md"))
runner = CliRunner()


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    fence = False
    found = set()
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.add(_anchor(line.lstrip("#")))
    return found


def test_the_readme_starts_with_the_product_then_the_two_commands_then_contents() -> None:
    intro = README.split("```sh", 1)[0]
    assert intro.startswith("# vmware-pilot\n")
    assert "approval gate between AI agents and your VMware estate" in intro  # what it is
    assert "for the\nplatform and operations teams" in intro or "platform and operations teams" in intro
    assert "](docs/console-gate.png)" in intro and (REPO / "docs" / "console-gate.png").is_file()
    assert len(intro.splitlines()) < 20  # the first screen
    block = README.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block == [  # .ci/run runs the second line
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/vmware-pilot demo",
        "bash scripts/test.sh",
    ]
    after = README.split("bash scripts/test.sh\n```", 1)[1]
    assert after.index("## Contents") < after.index("## Prerequisites") < after.index("\n## Safety rules")
    for must in ("Python 3.11", "apt-get", "Node.js 20", "root or `sudo`"):
        assert must in README.split("## Prerequisites", 1)[1].split("\n## ", 1)[0], must


def test_the_walk_from_the_demo_and_every_client_configuration_are_there() -> None:
    walk = README.split("## From the demo to your vCenter", 1)[1].split("\n## ", 1)[0]
    for step in ("pipx install", "uv tool install", "config.yaml", "--dispatch", "/console/", "approve"):
        assert step in walk, step
    clients = README.split("## Adding Pilot to an MCP client", 1)[1].split("\n## ", 1)[0]
    for client in ("Claude Code", "Claude Desktop", "VS Code", "Cursor"):
        assert f"**{client}**" in clients, client


@pytest.mark.parametrize("doc", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file_and_heading(doc: Path) -> None:
    text = doc.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        assert file.exists(), f"{doc.name}: {target}"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file.read_text()), f"{doc.name}: {target}"


def test_reference_material_lives_in_docs_and_is_linked() -> None:
    for name, heading in (
        ("settings.md", "# Settings"),
        ("benchmarks.md", "# Benchmarks"),
        ("fuzzing.md", "# Fuzzing"),
        ("scaling.md", "# Running several Pilots"),
    ):
        assert (REPO / "docs" / name).read_text().startswith(heading + "\n"), name
        assert f"](docs/{name})" in README, name
    for moved in ("## Settings\n", "## Benchmarks\n", "## Fuzzing\n", "## Running several Pilots\n"):
        assert moved not in README


def _leaves(name: str, command: Any) -> list[tuple[str, Any]]:
    sub = getattr(command, "commands", None)
    if not sub:
        return [(name, command)]
    return [leaf for key, child in sub.items() for leaf in _leaves(f"{name} {key}", child)]


def _all_commands() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in COMMANDS:
        command = load_command(name)
        if name == "templates":  # a group that also lists when given no subcommand
            found[name] = command
        found.update(_leaves(name, command))
    return found


def test_the_json_claim_names_exactly_the_commands_without_json() -> None:
    claim = re.search(r"Every command that reports a result takes\s+`--json` \(all but (.*?)\)", README, re.S)
    assert claim is not None, "the README's --json sentence"
    excepted = set(re.findall(r"`([a-z -]+)`", claim.group(1)))
    commands = _all_commands()
    assert excepted <= set(commands), excepted - set(commands)
    without = {name for name, command in commands.items() if "--json" not in _options(command)}
    assert without == excepted


def _options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in getattr(param, "opts", [])}


# Every command that takes a workflow id, in a form that reaches the id.
BY_ID = [
    ["status", "wf-nope"],
    ["review", "wf-nope"],
    ["approve", "wf-nope", "--yes"],
    ["reject", "wf-nope", "--reason", "no", "--yes"],
    ["cancel", "wf-nope", "--yes"],
    ["rollback", "wf-nope", "--yes"],
    ["audit", "verify", "--workflow", "wf-nope"],
]


def test_the_hint_claims_hold() -> None:
    assert "Refusals carry\n`error`, a `hint`" in README or "Refusals carry `error`, a `hint`" in README
    assert "every refusal of an engine rule, an\nunknown workflow id" in README


@pytest.mark.parametrize("args", BY_ID, ids=lambda a: " ".join(a[:2]))
def test_an_unknown_workflow_id_is_refused_with_a_hint_by_every_command(
    args: list[str], settings: Any
) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    error, hint = [line for line in done.stderr.splitlines() if line.strip()]
    assert error.startswith("error: ") and "wf-nope" in error
    assert hint.startswith("hint: ") and "vmware-pilot" in hint
