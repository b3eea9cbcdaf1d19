"""Every regex and text scrubber is linear: 1 MB adversarial inputs finish, not hang.

Each probe runs in its own process with a generous deadline: a backtracking (quadratic) scan needs
hours on these inputs, a linear one well under a second, so the deadline only detects a hang and
asserts nothing about speed. The pattern list is discovered, so a new regex is probed too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import linear_probe

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0


def probe(kind: str, name: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.linear_probe", kind, name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        last = out.strip().splitlines()[-1] if out.strip() else name
        pytest.fail(f"no answer within {DEADLINE:.0f} s: stuck at {last!r} (a backtracking scan)")
    assert proc.returncode == 0, out
    assert out.strip().endswith("ok"), out


def test_every_module_pattern_is_found() -> None:
    names = linear_probe.patterns()
    assert {"vmware_pilot.safety.redaction:_KEY", "vmware_pilot.templates.custom:_PLACEHOLDER"} <= set(names)
    assert len(names) >= 15, names


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(linear_probe.patterns()))
def test_pattern_is_linear_on_huge_input(name: str) -> None:
    probe("patterns", name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(linear_probe.HELPERS))
def test_scrubber_is_linear_on_huge_input(name: str) -> None:
    probe("helpers", name)
