"""Finding a skill's server: setting, beside the interpreter, absolute PATH entries, install hints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from vmware_pilot.config import Settings
from vmware_pilot.dispatch.locate import locate, package_name, search_dirs
from vmware_pilot.errors import DispatchRefused


def _server(folder: Path, name: str, *, executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    return {name: tmp_path / name for name in ("venv_bin", "first", "second")}


def test_server_beside_the_interpreter_wins_over_path(dirs: dict[str, Path]) -> None:
    beside = _server(dirs["venv_bin"], "vmware-aiops-mcp")
    _server(dirs["first"], "vmware-aiops-mcp")

    found = locate("aiops", path=str(dirs["first"]), interpreter=str(dirs["venv_bin"] / "python"))

    assert found.argv == (str(beside),)
    assert found.source == "interpreter"
    assert found.skill == "aiops"


def test_path_entries_are_searched_in_order(dirs: dict[str, Path]) -> None:
    _server(dirs["second"], "vmware-monitor-mcp")
    first = _server(dirs["first"], "vmware-monitor-mcp")
    path = os.pathsep.join([str(dirs["first"]), str(dirs["second"])])

    found = locate("monitor", path=path, interpreter=str(dirs["venv_bin"] / "python"))

    assert found.argv == (str(first),)
    assert found.source == "path"


def test_relative_path_entries_are_skipped(
    tmp_path: Path, dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _server(tmp_path / "rel", "vmware-aiops-mcp")

    with pytest.raises(DispatchRefused):
        locate(
            "aiops", path=os.pathsep.join(["rel", "./rel", ""]), interpreter=str(dirs["venv_bin"] / "python")
        )
    assert search_dirs(path=os.pathsep.join(["rel", str(dirs["first"])]), interpreter="/x/bin/python") == [
        Path("/x/bin"),
        dirs["first"],
    ]


def test_files_that_are_not_executable_or_not_files_are_passed_over(dirs: dict[str, Path]) -> None:
    _server(dirs["first"], "vmware-aiops-mcp", executable=False)
    (dirs["second"] / "vmware-aiops-mcp").mkdir(parents=True)
    path = os.pathsep.join([str(dirs["first"]), str(dirs["second"])])

    with pytest.raises(DispatchRefused, match="not installed"):
        locate("aiops", path=path, interpreter=str(dirs["venv_bin"] / "python"))


def test_skill_names_are_normalised_before_the_search(dirs: dict[str, Path]) -> None:
    server = _server(dirs["first"], "vmware-nsx-security-mcp")

    found = locate(" VMware_NSX_Security ", path=str(dirs["first"]), interpreter="")

    assert found.skill == "nsx-security"
    assert found.argv == (str(server),)


def test_setting_overrides_the_search_with_a_command_line(tmp_path: Path, dirs: dict[str, Path]) -> None:
    _server(dirs["first"], "vmware-nsx-mcp")
    custom = _server(tmp_path / "opt", "vmware-nsx-mgmt-mcp")

    found = locate(
        "nsx", {"vmware-nsx": f"{custom} --flag 'two words'"}, path=str(dirs["first"]), interpreter=""
    )

    assert found.argv == (str(custom), "--flag", "two words")
    assert found.args == ["--flag", "two words"]
    assert found.source == "setting"


def test_setting_with_a_bare_program_name_is_found_on_path(dirs: dict[str, Path]) -> None:
    program = _server(dirs["second"], "nsx-wrapper")

    found = locate("nsx", {"nsx": "nsx-wrapper -v"}, path=str(dirs["second"]), interpreter="")

    assert found.argv == (str(program), "-v")


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("/no/such/vmware-nsx-mcp", "is not an executable file"),
        ("bin/vmware-nsx-mcp", "is a relative path"),
        ("missing-program", "was not found"),
        ("", "is empty"),
        ("'unclosed", "cannot be parsed"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_setting(
    dirs: dict[str, Path], command: str, problem: str
) -> None:
    _server(dirs["first"], "vmware-nsx-mcp")  # the default would be found: the setting still wins

    with pytest.raises(DispatchRefused) as caught:
        locate("nsx", {"nsx": command}, path=str(dirs["first"]), interpreter="")

    assert problem in caught.value.message
    assert "VMWARE_PILOT_SKILL_COMMANDS" in caught.value.hint


def test_not_found_says_how_to_install_with_the_right_package(dirs: dict[str, Path]) -> None:
    with pytest.raises(DispatchRefused) as caught:
        locate("nsx", path=str(dirs["first"]), interpreter="")

    err = caught.value
    assert "vmware-nsx-mcp" in err.message
    assert "uv tool install vmware-nsx-mgmt" in err.hint
    assert "VMWARE_PILOT_SKILL_COMMANDS" in err.hint
    assert err.payload()["skill"] == "nsx"
    assert err.payload()["package"] == "vmware-nsx-mgmt"
    assert package_name("aiops") == "vmware-aiops"


@pytest.mark.parametrize(
    ("skill", "message"), [("", "names no skill"), ("9lives", "not a family skill"), ("pilot", "itself")]
)
def test_names_that_cannot_be_a_family_skill_are_refused(skill: str, message: str) -> None:
    with pytest.raises(DispatchRefused, match=message):
        locate(skill, path="", interpreter="")


def test_known_skills_limit_what_is_accepted(dirs: dict[str, Path]) -> None:
    _server(dirs["first"], "vmware-extra-mcp")

    with pytest.raises(DispatchRefused, match="not a known skill") as caught:
        locate("extra", known_skills=["aiops", "monitor"], path=str(dirs["first"]), interpreter="")
    assert "aiops, monitor" in caught.value.hint


def test_skill_commands_setting_is_read_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "VMWARE_PILOT_SKILL_COMMANDS", json.dumps({"nsx": "/opt/x/vmware-nsx-mgmt-mcp --flag"})
    )

    assert Settings().skill_commands == {"nsx": "/opt/x/vmware-nsx-mgmt-mcp --flag"}


def test_skill_commands_setting_refuses_an_unparsable_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMWARE_PILOT_SKILL_COMMANDS", json.dumps({"nsx": "'unclosed"}))

    with pytest.raises(ValidationError, match="cannot be parsed"):
        Settings()


def _script(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_server_whose_tool_environment_is_gone_is_refused_naming_its_interpreter(
    tmp_path: Path, dirs: dict[str, Path]
) -> None:
    # What `uv tool uninstall` or a Python upgrade leaves behind: the program on PATH, its venv gone.
    gone = tmp_path / "tools" / "vmware-aiops" / "bin" / "python"
    _script(dirs["first"], "vmware-aiops-mcp", f"#!{gone}\nimport sys\n")

    with pytest.raises(DispatchRefused) as caught:
        locate("aiops", path=str(dirs["first"]), interpreter="")

    err = caught.value
    assert "environment of skill 'aiops' is missing" in err.message
    assert str(gone) in err.message
    assert "uv tool install --reinstall vmware-aiops" in err.hint
    assert err.payload()["interpreter"] == str(gone)
    assert "package" not in err.payload()  # not the "not installed" refusal: it is installed, broken


def test_pips_long_path_trampoline_and_a_configured_command_are_checked_too(
    tmp_path: Path, dirs: dict[str, Path]
) -> None:
    gone = tmp_path / "a path with spaces" / "python"
    trampoline = f"#!/bin/sh\n'''exec' \"{gone}\" \"$0\" \"$@\"\n' '''\nimport sys\n"
    program = _script(dirs["first"], "vmware-monitor-mcp", trampoline)

    with pytest.raises(DispatchRefused) as found:
        locate("monitor", path=str(dirs["first"]), interpreter="")
    with pytest.raises(DispatchRefused) as configured:
        locate("monitor", {"monitor": f"{program} --stdio"}, path="", interpreter="")

    for caught in (found, configured):
        assert caught.value.payload()["interpreter"] == str(gone)


@pytest.mark.parametrize(
    "head",
    ["#!/bin/sh\nexit 0\n", "#!/usr/bin/env python3\n", "\x7fELF binary", "#!{alive}\n", ""],
)
def test_servers_whose_interpreter_exists_or_is_not_named_are_found(head: str, dirs: dict[str, Path]) -> None:
    import sys

    program = _script(dirs["first"], "vmware-aiops-mcp", head.format(alive=sys.executable))

    assert locate("aiops", path=str(dirs["first"]), interpreter="").argv == (str(program),)
