"""The fifteen built-in templates, in registry order (docs/contract.md#templates)."""

from __future__ import annotations

from typing import Any

from vmware_pilot.templates.builtin.base import BuiltinTemplate, ParamProblem, Plan, StepList
from vmware_pilot.templates.builtin.clone import CLONE_AND_TEST
from vmware_pilot.templates.builtin.infra import (
    BASELINE_REMEDIATE,
    NETWORK_SEGMENT_SETUP,
    STORAGE_EXPANSION,
    VKS_CLUSTER_DEPLOY,
)
from vmware_pilot.templates.builtin.observe import (
    BASELINE_AUDIT,
    BASELINE_CAPTURE,
    COMPLIANCE_SCAN,
    INCIDENT_RESPONSE,
    INVESTIGATE_ALERT,
)
from vmware_pilot.templates.builtin.vm import (
    CAPACITY_EXPANSION,
    DISASTER_RECOVERY,
    PATCH_DEPLOYMENT,
    PLAN_AND_APPROVE,
    ROLLING_RESTART,
)

__all__ = ["BUILTINS", "BuiltinTemplate", "ParamProblem", "Plan", "StepList"]

BUILTINS: tuple[BuiltinTemplate[Any], ...] = (
    CLONE_AND_TEST,
    INCIDENT_RESPONSE,
    INVESTIGATE_ALERT,
    PLAN_AND_APPROVE,
    COMPLIANCE_SCAN,
    NETWORK_SEGMENT_SETUP,
    VKS_CLUSTER_DEPLOY,
    ROLLING_RESTART,
    CAPACITY_EXPANSION,
    DISASTER_RECOVERY,
    PATCH_DEPLOYMENT,
    STORAGE_EXPANSION,
    BASELINE_CAPTURE,
    BASELINE_AUDIT,
    BASELINE_REMEDIATE,
)
