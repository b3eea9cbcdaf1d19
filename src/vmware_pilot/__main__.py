"""`python -m vmware_pilot [options]` serves MCP on stdio, like `vmware-pilot mcp [options]`."""

import sys

from vmware_pilot.cli.main import app

app(["mcp", *sys.argv[1:]], prog_name="vmware-pilot mcp")
