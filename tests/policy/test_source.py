"""The policy in force: the file re-read when it changes, the last usable policy kept when an
edit cannot be used, and the start-up check refusing with lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vmware_pilot.errors import StartupRefused
from vmware_pilot.policy.model import EMPTY
from vmware_pilot.policy.source import PolicySource

ONE = "deny:\n  - name: one\n    match: {tool: aiops.delete_vm}\n    reason: not by agents\n"
TWO = "deny:\n  - name: two\n    match: {tool: aiops.power_off_vm}\n    reason: facility team\n"


def _write(path: Path, text: str, tick: int) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(tick * 10**9, tick * 10**9))  # a distinct time whatever the file system's resolution


def test_the_file_is_re_read_when_it_changes_and_a_broken_edit_keeps_the_last_policy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "policies.yaml"
    source = PolicySource(path)
    assert source.check() == EMPTY
    _write(path, ONE, 1)
    assert [r.name for r in source.current().deny] == ["one"]
    _write(path, "deny:\n  - match: {tool: [\n", 2)
    assert [r.name for r in source.current().deny] == ["one"]
    assert "stays in force" in caplog.text
    _write(path, TWO, 3)
    assert [r.name for r in source.current().deny] == ["two"]
    path.unlink()
    assert source.current() == EMPTY


def test_the_start_up_check_names_the_lines(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("conflicts: {mode: maybe}\nwindows: 3\n", encoding="utf-8")
    with pytest.raises(StartupRefused) as caught:
        PolicySource(path).check_at_start()
    assert "line 1: conflicts.mode" in caught.value.message
    assert "line 2: windows" in caught.value.message
    assert caught.value.hint
