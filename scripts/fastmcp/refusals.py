"""Send one refusal per tool through fastmcp's client and print what it saw (run with .fastmcp-venv).

    .fastmcp-venv/bin/python scripts/fastmcp/refusals.py stdio COMMAND [ARGS...]
    .fastmcp-venv/bin/python scripts/fastmcp/refusals.py http URL      (bearer token in PILOT_TOKEN)

The calls come from PILOT_REFUSALS ({tool: arguments}). Tools are listed first, as a client does
(fastmcp parses each result's structured content with the tool's outputSchema). A refusal is read
with ``raise_on_error=False``: by default fastmcp's ``call_tool`` turns every result flagged isError
into a ToolError on purpose. Prints {"tools": {name: {isError, text} | {threw}}}; decides nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport


async def main(mode: str, target: str, rest: list[str]) -> dict[str, Any]:
    if mode == "http":
        transport: Any = StreamableHttpTransport(
            target, headers={"Authorization": f"Bearer {os.environ.get('PILOT_TOKEN', '')}"}
        )
    else:
        transport = StdioTransport(command=target, args=rest, env=dict(os.environ))
    report: dict[str, Any] = {"tools": {}}
    async with Client(transport) as client:
        report["listed"] = [t.name for t in await client.list_tools() if t.outputSchema]
        for name, arguments in json.loads(os.environ["PILOT_REFUSALS"]).items():
            try:
                result = await client.call_tool(name, arguments, raise_on_error=False)
                text = result.content[0].text if result.content else None  # type: ignore[union-attr]
                report["tools"][name] = {"isError": result.is_error, "text": text}
            except Exception as exc:  # what the test looks for: no client may throw
                report["tools"][name] = {"threw": f"{type(exc).__name__}: {exc}"}
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))))
