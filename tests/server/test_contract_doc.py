"""docs/contract.md describes the tools the server really lists: every tool has its section, in
tools/list order, naming each of its parameters."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.server.conftest import Client

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
        for param in tool.inputSchema.get("properties", {})
        if f"`{param}`" not in sections[tool.name]
    ]
    assert missing == []
