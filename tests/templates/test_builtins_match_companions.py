"""Every built-in step names a real companion tool and passes it parameters its schema accepts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.refs import is_ref
from vmware_pilot.safety.redaction import is_secret_ref
from vmware_pilot.safety.review import RUN_BLOCKING_KINDS, review
from vmware_pilot.templates.builtin import BUILTINS
from vmware_pilot.templates.registry import TemplateRegistry

CASES = [(b.name, i, ex) for b in BUILTINS for i, ex in enumerate(b.examples)]


def test_every_builtin_has_example_params() -> None:
    assert [b.name for b in BUILTINS if not b.examples] == []


@pytest.fixture(scope="module")
def catalog(companion_tools: dict[str, Any]) -> Catalog:
    return Catalog.from_snapshot(companion_tools)


@pytest.fixture(scope="module")
def tools(companion_tools: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """skill → tool name → tool entry of the snapshot."""
    return {
        skill_key(skill): {t["name"]: t for t in entry["tools"]} for skill, entry in companion_tools.items()
    }


def _at_reference(params: Any, path: list[Any]) -> bool:
    """Is the value at ``path`` (or a container on the way) a step or secret reference?

    References are resolved only at dispatch, so their type says nothing yet.
    """
    current = params
    for part in path:
        current = current[part]
        if is_ref(current) or is_secret_ref(current):
            return True
    return False


def _calls(step: Step) -> Iterator[tuple[str, str, dict[str, Any]]]:
    yield "step", step.tool, step.params
    if step.rollback_tool:
        yield "rollback", step.rollback_tool, step.rollback_params


@pytest.mark.parametrize(("name", "n", "example"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_builtin_steps_call_real_tools_with_valid_params(
    name: str, n: int, example: dict[str, Any], tmp_path: Path, catalog: Catalog, tools: dict[str, Any]
) -> None:
    wf = TemplateRegistry(tmp_path, catalog).create(name, example, "tester")
    problems = []
    for step in wf.steps:
        if step.is_gate:
            continue
        for kind, tool, params in _calls(step):
            entry = tools.get(skill_key(step.skill), {}).get(tool)
            if entry is None:
                problems.append(f"step {step.index} {kind}: {step.skill}.{tool} does not exist")
                continue
            schema = entry["inputSchema"]
            validator = Draft202012Validator(schema)
            for error in validator.iter_errors(params):
                if not _at_reference(params, list(error.absolute_path)):
                    problems.append(f"step {step.index} {kind} {step.skill}.{tool}: {error.message}")
            # A tool that previews unless confirmed must get confirm: true, or it would change nothing.
            if "confirm" in schema.get("properties", {}) and params.get("confirm") is not True:
                problems.append(f"step {step.index} {kind} {step.skill}.{tool}: no confirm: true")
    assert problems == []


@pytest.mark.parametrize(("name", "n", "example"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_builtin_has_no_blocking_review_finding(
    name: str, n: int, example: dict[str, Any], tmp_path: Path, catalog: Catalog
) -> None:
    wf = TemplateRegistry(tmp_path, catalog).create(name, example, "tester")
    findings = review(wf, catalog)["findings"]
    assert [f for f in findings if f["kind"] in RUN_BLOCKING_KINDS] == []


def test_the_check_fails_for_a_param_the_real_tool_does_not_take(tools: dict[str, Any]) -> None:
    # The rule above in action: aiops power_on_vm has no confirm parameter and rejects unknown ones.
    schema = tools["aiops"]["power_on_vm"]["inputSchema"]
    errors = list(Draft202012Validator(schema).iter_errors({"vm_name": "a", "confirm": True}))
    assert [e.validator for e in errors] == ["additionalProperties"]
