"""docs/contract.md describes the server as it is: a section per listed tool, in tools/list order,
naming each of its parameters; the record's keys, the step keys and statuses, the states and the
outcomes as the server and the enums have them."""

from __future__ import annotations

import re

from tests.support import REPO
from tests.support.mcp_client import Client
from vmware_pilot.domain.enums import Outcome, StepStatus, WorkflowState

CONTRACT = REPO / "docs" / "contract.md"


def tool_sections() -> dict[str, str]:
    """``{tool: text of its section}`` for the level-3 headings under ``## Tools``."""
    text = CONTRACT.read_text(encoding="utf-8")
    start = text.index("\n## Tools\n")
    part = text[start : text.index("\n## ", start + 1)]
    pieces = re.split(r"^### (\S+)\n", part, flags=re.M)
    return dict(zip(pieces[1::2], pieces[2::2], strict=True))


async def test_every_listed_tool_has_a_section_in_order(client: Client) -> None:
    listed = [t.name for t in (await client.session.list_tools()).tools]
    assert list(tool_sections()) == listed


async def test_each_section_names_every_parameter_of_its_tool(client: Client) -> None:
    sections = tool_sections()
    missing = [
        f"{tool.name}.{param}"
        for tool in (await client.session.list_tools()).tools
        for param in tool.input_schema.get("properties", {})
        if f"`{param}`" not in sections[tool.name]
    ]
    assert missing == []


def section(title: str) -> str:
    text = CONTRACT.read_text(encoding="utf-8")
    start = text.index(f"\n{title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def first_column_names(part: str) -> list[str]:
    """The backticked names in the first column of the Markdown table rows of ``part``."""
    names: list[str] = []
    for line in part.splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([^`]+)`", line.split("|")[1])
    return names


async def test_the_record_table_lists_the_status_keys_in_order(client: Client) -> None:
    status = await client.status(await client.incident())
    added = {"gates", "in_flight"}  # documented below the table, present only when they apply
    assert first_column_names(section("## The workflow record")) == [k for k in status if k not in added]


async def test_the_step_keys_and_statuses_are_the_ones_a_step_has(client: Client) -> None:
    run = await client.ok("run_workflow", workflow_id=await client.incident())
    steps = section("## Steps")
    listed = re.search(r"Step keys, in this order: (.*?)\. A gate", steps, re.S)
    assert listed is not None
    names = [n for n in re.findall(r"`(\w+)`", listed[1]) if n != "require_approval"]  # a value
    assert names == list(run["steps"][0])
    assert first_column_names(section("### Step statuses")) == [s.value for s in StepStatus]


def test_the_states_and_outcomes_are_the_enums() -> None:
    states = re.findall(r"`(\w+)`", section("## Workflow states").split("\n\n")[1])
    assert states[: len(WorkflowState)] == [s.value for s in WorkflowState]
    assert first_column_names(section("## Outcomes")) == [o.value for o in Outcome]
