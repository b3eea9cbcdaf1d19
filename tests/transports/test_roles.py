"""The roles file: custom roles with approve any|others|none, re-read on change, broken → custom roles off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vmware_pilot.domain.actor import Actor
from vmware_pilot.safety.duties import READ_TOOLS
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.roles import RoleBook, RoleUnusable, parse_roles

GOOD = """
roles:
  operator:
    approve: others
    tools: "*"
  auditor:
    approve: none
    tools: read
  planner:
    approve: none
    tools: [design_workflow, update_draft, get_workflow_status]
"""


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, mode)
    os.write(fd, text.encode())
    os.close(fd)
    tmp.chmod(mode)
    tmp.replace(path)


@pytest.fixture
def book(pilot_home: Path) -> RoleBook:
    return RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)


def test_custom_roles_are_read_with_their_approve_rule_and_tools(book: RoleBook) -> None:
    _write(book.path, GOOD)
    operator, auditor, planner = (book.lookup(n) for n in ("operator", "auditor", "planner"))
    assert (operator.approve, operator.tools) == ("others", None)
    assert (auditor.approve, auditor.tools) == ("none", READ_TOOLS)
    assert planner.tools == frozenset({"design_workflow", "update_draft", "get_workflow_status"})


def test_builtins_work_without_a_roles_file(book: RoleBook) -> None:
    assert book.lookup("admin").approve == "any"
    assert book.lookup("reader").tools == READ_TOOLS
    with pytest.raises(RoleUnusable, match="not defined") as exc:
        book.lookup("operator")
    assert "set-role" in exc.value.hint


def test_an_edit_takes_effect_on_the_next_lookup(book: RoleBook) -> None:
    _write(book.path, GOOD)
    assert book.lookup("operator").approve == "others"
    _write(book.path, GOOD.replace("approve: others", "approve: any"))
    assert book.lookup("operator").approve == "any"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("roles: [1, 2]", "roles must map role names"),
        ("roles:\n  admin:\n    approve: any\n    tools: '*'\n", "built in"),
        ("roles:\n  op:\n    approve: sometimes\n    tools: '*'\n", "approve must be one of"),
        ("roles:\n  op:\n    approve: any\n", "exactly the keys"),
        ("roles:\n  op:\n    approve: any\n    tools: '*'\n    extra: 1\n", "exactly the keys"),
        ("roles:\n  op:\n    approve: any\n    tools: [delete_everything]\n", "unknown tool"),
        ("roles:\n  op:\n    approve: any\n    tools: []\n", "non-empty list"),
        ("roles:\n  'bad name':\n    approve: any\n    tools: '*'\n", "not valid"),
        ("roles: {op: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_broken_file_is_refused_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_roles(text, TOOL_NAMES)


def test_a_broken_file_turns_custom_roles_off_but_keeps_the_builtins(book: RoleBook) -> None:
    _write(book.path, GOOD + "  broken:\n    approve: maybe\n    tools: '*'\n")
    listing = book.listing()
    assert set(listing.roles) == {"admin", "reader"}
    assert "approve must be one of" in listing.problem
    with pytest.raises(RoleUnusable, match="roles file is broken"):
        book.lookup("operator")
    assert book.lookup("admin").approve == "any"


def test_a_file_others_can_write_is_not_trusted(book: RoleBook) -> None:
    _write(book.path, GOOD, mode=0o666)
    with pytest.raises(RoleUnusable, match="not be writable by others"):
        book.lookup("operator")
    book.path.chmod(0o600)
    assert book.lookup("operator").approve == "others"


def test_the_readme_roles_example_is_a_valid_roles_file() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Network transport", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    roles = parse_roles("\n".join(line.removeprefix("  ") for line in block.splitlines()), TOOL_NAMES)
    assert roles["operator"].approve == "others" and roles["operator"].tools is None
    assert roles["planner"].approve == "none" and "confirm_draft" in (roles["planner"].tools or ())


GROUPS = (
    GOOD
    + """groups:
  vmware-operators: operator
  pilot-auditors: auditor
  admin: ~
"""
)


def test_groups_map_to_roles_and_a_group_named_like_a_role_gives_it(book: RoleBook) -> None:
    _write(book.path, GROUPS)
    assert book.for_groups(["vmware-operators", "stranger"]).name == "operator"
    assert book.for_groups(["reader"]).name == "reader"  # not listed: named like the role
    assert book.for_groups(["planner"]).name == "planner"  # a custom role works the same way
    with pytest.raises(RoleUnusable, match=r"None of your groups \(admin, stranger\)") as exc:
        book.for_groups(["stranger", "admin"])  # the file takes admin away from a group named admin
    assert "groups:" in exc.value.hint


def test_several_roles_add_up_to_every_tool_and_the_most_permissive_approve_rule(book: RoleBook) -> None:
    _write(book.path, GROUPS)
    both = book.for_groups(["pilot-auditors", "planner"])
    assert both.name == "auditor+planner" and both.approve == "none"
    assert both.tools == READ_TOOLS | {"design_workflow", "update_draft"}
    wide = book.for_groups(["pilot-auditors", "vmware-operators"])
    assert (wide.approve, wide.tools) == ("others", None)


def test_the_role_of_a_token_caller_is_still_its_token_role(book: RoleBook) -> None:
    _write(book.path, GROUPS)
    assert book.role_of(Actor("ci", kind="token", role="auditor")).name == "auditor"
    assert book.role_of(Actor("sub", kind="oidc", groups=("vmware-operators",))).name == "operator"


@pytest.mark.parametrize(
    ("groups", "problem"),
    [
        ("groups: [a]\n", "groups must map"),
        ("groups:\n  ops: no-such-role\n", "not a role"),
        ("groups:\n  ops: 3\n", "not a role"),
    ],
)
def test_a_bad_group_mapping_breaks_the_file(groups: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_roles(GOOD + groups, TOOL_NAMES)
