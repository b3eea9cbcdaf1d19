"""A fake skill server whose tools/list answers in pages of two (real skills never paginate)."""

from __future__ import annotations

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name=f"tool_{i}",
        description=f"Tool number {i}.\nSecond line.",
        inputSchema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        annotations=types.ToolAnnotations(readOnlyHint=i % 2 == 0, destructiveHint=i == 3),
    )
    for i in range(5)
]

server: Server[object, object] = Server("fake-paged", version="9.9")


@server.list_tools()
async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
    start = int(request.params.cursor) if request.params and request.params.cursor else 0
    end = start + 2
    return types.ListToolsResult(tools=TOOLS[start:end], nextCursor=str(end) if end < len(TOOLS) else None)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
