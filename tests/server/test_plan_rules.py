"""Plans are valid when stored: step references, empty plans and gate options at every door."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp_client import DELETE_STEP, GATE, READ_STEP, Client
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.requests import UpdateDraftRequest
from vmware_pilot.templates.steps import make_step

PLAN = {"action": "plan", "skill": "aiops", "tool": "create_vm_plan", "params": {"operations": []}}


def use(value: Any, **extra: Any) -> dict[str, Any]:
    return {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": value}, **extra}


BAD_REFERENCES = [
    # (steps, step index named, parameter named, words in the error)
    ([PLAN, use("__from_step_7__:plan_id")], 1, "params.x", "the plan has steps 0..1"),
    ([PLAN, use("__from_step_1__")], 1, "params.x", "this step or a later one"),
    ([use("__from_step_1__"), PLAN], 0, "params.x", "this step or a later one"),
    ([PLAN, use("__from_step_0:plan_id")], 1, "params.x", "malformed"),
    ([PLAN, use("__from_step_x__")], 1, "params.x", "malformed"),
    ([PLAN, use(["ok", {"deep": "__from_step_-1__"}])], 1, "params.x[1].deep", "the plan has steps 0..1"),
    (
        [PLAN, use({"k" * 5000: "__from_step_" + "9" * 5000 + "__"})],
        1,
        "params.x." + "k" * 40 + "…",
        "malformed",
    ),
    (
        [
            PLAN,
            {**use("a"), "rollback_tool": "get_events", "rollback_params": {"y": "__from_step_2__"}},
            PLAN,
        ],
        1,
        "rollback_params.y",
        "a later step",
    ),
]


async def _active(client: Client) -> int:
    return len((await client.ok("list_workflows"))["active_workflows"])


@pytest.mark.parametrize(("steps", "index", "field", "words"), BAD_REFERENCES)
async def test_create_workflow_refuses_a_reference_that_cannot_resolve(
    client: Client, steps: list[dict[str, Any]], index: int, field: str, words: str
) -> None:
    out = await client.refused("create_workflow", name="refs", description="d", steps=steps)
    assert (out["step_index"], out["field_name"]) == (index, field)
    assert f"Step {index}: {field}" in out["error"] and words in out["error"]
    assert len(out["error"]) < 400, "a refusal quotes only a little of the input"
    assert "__from_step_N__" in out["hint"]
    assert await _active(client) == 0, "nothing was stored"


async def test_a_reference_to_an_earlier_step_and_an_undo_to_its_own_step_are_accepted(
    client: Client,
) -> None:
    undo = {"rollback_tool": "get_events", "rollback_params": {"y": "__from_step_1__:id"}}
    await client.custom([PLAN, use("__from_step_0__:plan_id", **undo), use(["__from_step_1__"])])


async def test_update_draft_refuses_a_bad_reference_and_keeps_the_draft(client: Client) -> None:
    wid = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wid, steps=[READ_STEP])
    out = await client.refused("update_draft", workflow_id=wid, steps=[PLAN, use("__from_step_5__")])
    assert (out["step_index"], out["field_name"]) == (1, "params.x")
    assert [s["tool"] for s in (await client.status(wid))["steps"]] == ["list_virtual_machines"]


async def test_an_empty_plan_is_refused_with_a_hint(client: Client) -> None:
    out = await client.refused("create_workflow", name="empty", description="d", steps=[])
    assert "no steps" in out["error"] and out["hint"]
    assert await _active(client) == 0


async def test_a_stored_plan_that_cannot_resolve_is_reported_and_never_run_or_handed_out(
    client: Client, pilot_app: PilotApp
) -> None:
    # Records stored before these rules held: a bad reference, an unusable gate option.
    broken = Workflow.new(
        "legacy",
        WorkflowState.PENDING,
        [
            make_step(0, "list", "aiops", "list_virtual_machines"),
            make_step(1, "use", "monitor", "get_events", {"x": "__from_step_9__"}),
        ],
        {"custom": True},
        created_by="tester",
    )
    gate = make_step(
        0, "require_approval", "pilot", "approve", {"message": "Go?", "expires_in_minutes": "{{t}}"}
    )
    odd_gate = Workflow.new(
        "legacy-gate",
        WorkflowState.PENDING,
        [gate, make_step(1, "list", "aiops", "list_virtual_machines")],
        {"custom": True},
    )
    for wf, kind, index in ((broken, "bad_step_reference", 1), (odd_gate, "bad_gate_option", 0)):
        pilot_app.store.workflows.create(wf)
        review = await client.ok("review_workflow", workflow_id=wf.id)
        assert review["verdict"] == "needs_revision"
        assert [(f["kind"], f["step_index"]) for f in review["findings"] if f["kind"] == kind] == [
            (kind, index)
        ]
        for force in (False, True):
            out = await client.refused("run_workflow", workflow_id=wf.id, force=force)
            assert [f["kind"] for f in out["blocking_findings"]] == [kind]
            assert "pending_dispatch" not in out and "force=True cannot" in out["hint"]
        assert (await client.status(wf.id))["state"] == "pending"


async def test_a_stored_empty_plan_does_not_complete(client: Client, pilot_app: PilotApp) -> None:
    empty = Workflow.new("legacy-empty", WorkflowState.PENDING, [], {"custom": True})
    pilot_app.store.workflows.create(empty)
    out = await client.refused("run_workflow", workflow_id=empty.id)
    assert "no steps" in out["error"]
    assert (await client.status(empty.id))["state"] == "pending"


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"expires_in_minutes": "{{ttl}}"}, "expires_in_minutes"),
        ({"approvals_required": "{{n}}"}, "approvals_required"),
        ({"approvals_required": "2 {{n}}"}, "approvals_required"),
    ],
)
async def test_a_gate_option_outside_a_template_is_refused_not_ignored(
    client: Client, options: dict[str, Any], key: str
) -> None:
    gate = {**GATE, "params": {**GATE["params"], **options}}
    out = await client.refused("create_workflow", name="opts", description="d", steps=[gate, READ_STEP])
    assert (out["step_index"], out["field_name"]) == (0, f"params.{key}")
    wid = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    out = await client.refused("update_draft", workflow_id=wid, steps=[gate, READ_STEP])
    assert out["field_name"] == f"params.{key}"


def _template(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(body)


async def test_yaml_templates_check_references_and_gate_options_once_filled(
    client: Client, pilot_app: PilotApp
) -> None:
    folder = pilot_app.settings.resolved_templates_dir
    _template(
        folder,
        "bad_ref",
        "name: bad_ref\nsteps:\n  - {skill: monitor, tool: get_alarms}\n"
        "  - {skill: monitor, tool: get_events, params: {x: __from_step_3__}}\n",
    )
    _template(
        folder,
        "filled",
        "name: filled\nparameters:\n  n: {type: integer, required: true}\n  ttl: {type: string, default: '60'}\n"
        "steps:\n  - {action: require_approval, params: {message: Proceed, expires_in_minutes: '{{ttl}}'}}\n"
        "  - {skill: monitor, tool: get_alarms}\n"
        "  - {skill: monitor, tool: get_events, params: {x: '__from_step_{{n}}__'}}\n",
    )
    listing = {t["name"]: t for t in (await client.ok("list_workflows"))["templates"]}
    assert "Step 1: params.x" in listing["bad_ref"]["error"]
    assert "error" not in listing["filled"]
    await client.ok("create_workflow_from_template", workflow_type="filled", params={"n": 1})
    out = await client.refused("create_workflow_from_template", workflow_type="filled", params={"n": 2})
    assert "Step 2: params.x" in out["error"]
    out = await client.refused(
        "create_workflow_from_template", workflow_type="filled", params={"n": 1, "ttl": "{{later}}"}
    )
    assert "expires_in_minutes" in out["error"]


async def test_confirm_draft_never_confirms_a_version_it_did_not_check(
    client: Client, pilot_app: PilotApp
) -> None:
    """Another Pilot on the same database replaces the steps between this confirm's check and its
    save: the confirm is refused and the draft stays a draft."""
    other = build_app(pilot_app.settings)
    wid = (await client.ok("design_workflow", goal="tidy up"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wid, steps=[READ_STEP])
    save = pilot_app.store.workflows.save
    raced: list[dict[str, Any]] = []

    def save_after_the_other_pilot(wf: Workflow, *args: Any, **kwargs: Any) -> None:
        if wf.id == wid and not raced:
            raced.append(
                other.service.update_draft(
                    UpdateDraftRequest(Actor("mallory"), wid, steps=[DELETE_STEP])
                ).payload()
            )
        save(wf, *args, **kwargs)

    pilot_app.store.workflows.save = save_after_the_other_pilot  # type: ignore[method-assign]
    try:
        out = await client.refused("confirm_draft", workflow_id=wid, save_as_template=False)
    finally:
        pilot_app.store.workflows.save = save  # type: ignore[method-assign]
        other.close()
    assert raced and raced[0]["approval_gate_violations"], "the other Pilot's ungated plan was stored"
    assert "changed by another caller" in out["error"] and "confirm_draft again" in out["hint"]
    status = await client.status(wid)
    assert status["state"] == "draft" and [s["tool"] for s in status["steps"]] == ["delete_vm"]
    refused = await client.refused("confirm_draft", workflow_id=wid)
    assert refused["approval_gate_violations"][0]["tool"] == "delete_vm"


@pytest.mark.parametrize(
    ("edit", "index", "words"),
    [
        (lambda steps: steps[2].params.update(x="__from_step_8__"), 2, "Step 2: params.x"),
        (lambda steps: steps[3].params.update(approvals_required="{{n}}"), 3, "'approvals_required' must be"),
    ],
)
async def test_a_stored_plan_that_went_bad_after_a_gate_runs_and_hands_out_nothing_on_approval(
    client: Client, pilot_app: PilotApp, edit: Any, index: int, words: str
) -> None:
    wid = await client.custom([READ_STEP, GATE, use("__from_step_0__"), GATE, READ_STEP])
    waiting = await client.ok("run_workflow", workflow_id=wid)
    assert waiting["outcome"] == "awaiting_approval"
    wf = pilot_app.store.workflows.load(wid)  # a record written before these rules held
    edit(wf.steps)
    wf.gates[1].digest = gate_records.plan_digest(wf, 1)  # reached with this plan
    pilot_app.store.workflows.save(wf)
    out = await client.call("approve", workflow_id=wid, approver="alice", acknowledge_not_executed=True)
    assert out.payload.get("outcome") == "failed", out.payload
    assert "pending_dispatch" not in out.payload
    step = out.payload["steps"][index]
    assert step["status"] == "failed" and words in step["result"]["error"]
    assert [s["status"] for s in out.payload["steps"]][2:] == [
        "failed" if i == index else "skipped" for i in range(2, 5)
    ]
