"""A fake skill server whose tools/list answers in pages of two (real skills never paginate)."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name=f"tool_{i}",
        description=f"Tool number {i}.\nSecond line.",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        annotations=types.ToolAnnotations(read_only_hint=i % 2 == 0, destructive_hint=i == 3),
    )
    for i in range(5)
]


async def list_tools(
    ctx: ServerRequestContext[object], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params and params.cursor else 0
    end = start + 2
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=str(end) if end < len(TOOLS) else None)


server: Server[object] = Server("fake-paged", version="9.9", on_list_tools=list_tools)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
