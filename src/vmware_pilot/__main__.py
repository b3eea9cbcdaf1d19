"""`python -m vmware_pilot [options]` serves MCP on stdio, like `vmware-pilot mcp [options]`."""

import sys


def main() -> None:
    """Serve MCP on stdio with the command-line options given after the module name."""
    from vmware_pilot.cli import stdio

    code = stdio.main(sys.argv[1:])
    if code is not None:  # a plain stdio start, served without loading typer
        sys.exit(code)
    from vmware_pilot.cli.commands import app  # the forms stdio.main leaves: help, errors, …

    app(["mcp", *sys.argv[1:]], prog_name="vmware-pilot mcp")


if __name__ == "__main__":
    main()
