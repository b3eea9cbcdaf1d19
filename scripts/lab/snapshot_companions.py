"""Regenerate tests/data/companion-tools.json from the companion skills pinned in the lab.

    .venv/bin/python scripts/lab/snapshot_companions.py            # rewrite the snapshot
    .venv/bin/python scripts/lab/snapshot_companions.py --check    # exit 1 when it is out of date

Starts the lab (``bash scripts/lab/setup.sh`` builds it), then each pinned companion's MCP
server with the lab's scratch HOME and config, exactly as the lab tests do, and lists its tools:
name, description, inputSchema and annotations, in the server's order. Skills the lab does not
pin keep the entries they have in the snapshot (captured from those skills' own servers). The
file is written with sorted keys and one-space indents so a regeneration diffs line by line.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
from typing import Any  # noqa: E402

from tests.support.lab_harness import COMPANIONS, LabNotBuilt, list_companion_tools, running_lab  # noqa: E402

SNAPSHOT = REPO / "tests" / "data" / "companion-tools.json"


def render(data: dict[str, Any]) -> str:
    """The snapshot's text: sorted keys, one-space indents, a final newline."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def live_entries() -> dict[str, dict[str, Any]]:
    """``{skill: entry}`` for every companion the lab pins, read from its running server."""
    with tempfile.TemporaryDirectory(prefix="pilot-snapshot-") as tmp, running_lab(Path(tmp)) as lab:
        return {skill: asyncio.run(list_companion_tools(lab, skill)) for skill in COMPANIONS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when out of date")
    parser.add_argument("--output", type=Path, default=SNAPSHOT, help="snapshot file (default: %(default)s)")
    args = parser.parse_args(argv)

    current: dict[str, Any] = json.loads(args.output.read_text()) if args.output.exists() else {}
    try:
        live = live_entries()
    except LabNotBuilt as exc:
        print(f"snapshot: {exc}", file=sys.stderr)
        return 2
    wanted = render({**current, **live})
    if args.check:
        stale = [skill for skill, entry in live.items() if current.get(skill) != entry]
        if stale:
            print(f"snapshot: {args.output} is out of date for {', '.join(stale)}", file=sys.stderr)
            return 1
        print(f"snapshot: {args.output} matches {', '.join(live)}")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(wanted)
    for skill, entry in live.items():
        print(f"snapshot: {skill} {entry['version']}: {len(entry['tools'])} tools")
    return 0


if __name__ == "__main__":
    sys.exit(main())
