"""review_workflow, get_workflow_status, list_workflows, get_skill_catalog.

See docs/contract.md#tools and #review.
"""

from __future__ import annotations

from tests.support.mcp_client import DELETE_STEP, INCIDENT, READ_STEP, Client

BUILTINS = [
    "clone_and_test",
    "incident_response",
    "investigate_alert",
    "plan_and_approve",
    "compliance_scan",
    "network_segment_setup",
    "vks_cluster_deploy",
    "rolling_restart",
    "capacity_expansion",
    "disaster_recovery",
    "patch_deployment",
    "storage_expansion",
    "baseline_capture",
    "baseline_audit",
    "baseline_remediate",
]
WF_KEYS = [
    "id",
    "workflow_type",
    "state",
    "steps",
    "params",
    "created_at",
    "updated_at",
    "approved_by",
    "diff_report",
    "audit_log",
    "blocked_reason",
    "rollback_results",
    "created_by",
    "authors",
]
STEP_KEYS = [
    "index",
    "action",
    "skill",
    "tool",
    "params",
    "status",
    "result",
    "started_at",
    "completed_at",
    "rollback_tool",
    "rollback_params",
    "group_id",
]
SUMMARY_KEYS = [
    "total_steps",
    "destructive_steps",
    "write_steps",
    "read_only_steps",
    "classified_steps",
    "unclassified_steps",
    "approval_gates",
    "parallel_groups",
    "est_duration_min",
]


async def test_review_of_a_builtin_template_approves_it(client: Client) -> None:
    wf = await client.incident()
    out = await client.ok("review_workflow", workflow_id=wf)
    assert out["workflow_id"] == wf
    assert out["verdict"] == "approved"
    assert list(out["summary"]) == SUMMARY_KEYS
    assert out["summary"]["total_steps"] == 4
    assert out["summary"]["approval_gates"] == 1
    assert out["summary"]["read_only_steps"] == 2


async def test_review_flags_ungated_destructive_and_placeholders_in_a_draft(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    placeholder = {**READ_STEP, "params": {"folder_filter": "TODO"}}
    await client.ok("update_draft", workflow_id=wf, steps=[placeholder, DELETE_STEP])
    out = await client.ok("review_workflow", workflow_id=wf)  # a review is a result, not an error
    assert out["verdict"] == "needs_revision"
    kinds = {(f["kind"], f["step_index"]) for f in out["findings"]}
    assert ("ungated_destructive", 1) in kinds
    assert ("placeholder_param", 0) in kinds
    assert all(list(f) == ["severity", "kind", "step_index", "message"] for f in out["findings"])


async def test_status_is_the_full_record_in_reference_key_order(client: Client) -> None:
    wf = await client.incident()
    out = await client.status(wf)
    assert list(out)[: len(WF_KEYS)] == WF_KEYS
    assert "outcome" not in out
    assert all(list(s)[: len(STEP_KEYS)] == STEP_KEYS for s in out["steps"])
    assert (out["id"], out["state"], out["created_by"], out["approved_by"]) == (wf, "pending", "tester", "")
    assert out["created_at"].endswith("+00:00")


async def test_status_diff_report_tracks_handed_out_and_reported_steps(client: Client) -> None:
    wf = await client.incident()
    assert (await client.status(wf))["diff_report"] is not None
    await client.ok("run_workflow", workflow_id=wf)
    await client.ok("approve", workflow_id=wf, approver="alice", acknowledge_not_executed=True)
    report = (await client.status(wf))["diff_report"]
    assert report, "diff_report stays empty after steps were handed out and reported done"


async def test_list_workflows_lists_builtins_with_step_counts(client: Client) -> None:
    out = await client.ok("list_workflows")
    # 2.4.0's two keys first and unchanged; the paging keys are additive.
    assert list(out) == ["templates", "active_workflows", "active_total", "next_offset"]
    assert out["active_workflows"] == [] and out["active_total"] == 0 and out["next_offset"] is None
    builtins = [t for t in out["templates"] if t["type"] == "builtin"]
    assert [t["name"] for t in builtins] == BUILTINS
    assert all(t["description"] for t in builtins)
    # The count is null only where it depends on the template's parameters.
    assert all(t["steps"] is None or (isinstance(t["steps"], int) and t["steps"] > 0) for t in builtins)
    assert any(isinstance(t["steps"], int) for t in builtins)


async def test_list_workflows_active_newest_first_and_paged(client: Client) -> None:
    ids = [await client.incident() for _ in range(4)]
    done = await client.incident()
    await client.ok("cancel_workflow", workflow_id=done, confirm=True)
    active = (await client.ok("list_workflows"))["active_workflows"]
    assert [w["id"] for w in active] == ids[::-1]
    assert all(list(w) == ["id", "type", "state", "created_at", "updated_at"] for w in active)
    page = await client.ok("list_workflows", limit=2, offset=1)
    assert [w["id"] for w in page["active_workflows"]] == ids[::-1][1:3]
    assert page["templates"] == (await client.ok("list_workflows"))["templates"]


async def test_list_workflows_without_limit_answers_the_50_most_recent_and_pages_on(client: Client) -> None:
    # Distinct inputs: 53 identical creates in a row would trip the runaway breaker (server/runaway.py).
    made = [
        await client.ok(
            "create_workflow_from_template",
            workflow_type="incident_response",
            params={**INCIDENT, "alert_name": f"High CPU {i}"},
        )
        for i in range(53)
    ]
    ids = [m["workflow_id"] for m in made][::-1]
    first = await client.ok("list_workflows")
    assert [w["id"] for w in first["active_workflows"]] == ids[:50]
    assert (first["active_total"], first["next_offset"]) == (53, 50)
    rest = await client.ok("list_workflows", offset=first["next_offset"])
    assert [w["id"] for w in rest["active_workflows"]] == ids[50:]
    assert (rest["active_total"], rest["next_offset"]) == (53, None)
    exact = await client.ok("list_workflows", limit=53)
    assert len(exact["active_workflows"]) == 53 and exact["next_offset"] is None


async def test_list_workflows_rejects_a_limit_outside_1_to_500(client: Client) -> None:
    result = await client.session.call_tool("list_workflows", {"limit": 0})
    assert result.is_error is True
    result = await client.session.call_tool("list_workflows", {"limit": 501})
    assert result.is_error is True
    assert not (await client.session.call_tool("list_workflows", {"limit": 500})).is_error
    result = await client.session.call_tool("list_workflows", {"offset": -1})
    assert result.is_error is True


async def test_skill_catalog_maps_skills_to_tools_with_risk(client: Client) -> None:
    out = await client.ok("get_skill_catalog")
    assert {"aiops", "monitor", "nsx"} <= set(out)
    for skill in out.values():
        assert skill["description"]
        for tool in skill["tools"].values():
            assert tool["risk"] in {"low", "medium", "high", "critical"}
            assert tool["desc"]
    assert out["monitor"]["tools"]["get_alarms"]["risk"] == "low"
