"""Which objects a step names, and how Pilot reads their state: one table, object kind by kind.

Each row says which step parameters name an object of that kind (``params`` for any tool of
``skills``, ``named_by`` for one tool's parameter), the companion read tool that returns it, how
to find the object in the answer (``get``: the tool is asked for it by name; ``list``: the tool
lists them all and the item whose ``match`` field is the name is it), the fields shown beside
the step, and a field that survives a rename (``stable``). ``creates`` lists the (tool, param)
pairs whose object the step brings into being, so its absence is expected. A kind gets a row
only where a companion has a read tool for it. Everything here is pure: the reads themselves
are ``engine.inspection``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "KINDS",
    "READ_TOOLS",
    "Named",
    "TargetKind",
    "find_item",
    "kind_of",
    "named_objects",
    "state_line",
    "summary_of",
]

MAX_NAMED: Final = 20


@dataclass(frozen=True)
class TargetKind:
    kind: str
    skills: frozenset[str]
    params: tuple[str, ...]
    read_skill: str
    read_tool: str
    locate: Literal["get", "list"]
    # get: the read tool's parameter the name goes into; list: the item field holding the name.
    key: str
    fields: tuple[str, ...]
    named_by: tuple[tuple[str, str], ...] = ()
    creates: tuple[tuple[str, str], ...] = ()
    stable: str = ""
    # The read tool takes the step's ``target`` (vCenter, NSX manager…) parameter.
    takes_target: bool = True
    # Further read arguments taken from the step's parameters: (read param, step param).
    extra: tuple[tuple[str, str], ...] = field(default=())


_VSPHERE = frozenset({"aiops", "monitor", "storage"})

KINDS: Final[tuple[TargetKind, ...]] = (
    TargetKind(
        "vm",
        frozenset({"aiops", "monitor"}),
        ("vm_name", "source_vm_name", "vm_names", "new_name"),
        "monitor",
        "get_vm_info",
        "get",
        "vm_name",
        ("power_state", "cpu", "memory_mb", "host"),
        creates=(
            ("create_vm", "vm_name"),
            ("deploy_vm_from_ova", "vm_name"),
            ("batch_clone_vms", "vm_names"),
            ("batch_linked_clone_vms", "vm_names"),
            ("clone_vm", "new_name"),
            ("deploy_vm_from_template", "new_name"),
            ("deploy_linked_clone", "new_name"),
        ),
        stable="uuid",
    ),
    TargetKind(
        "host",
        _VSPHERE,
        ("host_name", "to_host", "target_host"),
        "monitor",
        "list_esxi_hosts",
        "list",
        "name",
        ("connection_state", "power_state", "cpu_cores", "memory_gb", "vm_count", "esxi_version"),
    ),
    TargetKind(
        "datastore",
        _VSPHERE,
        ("datastore_name", "to_datastore"),
        "monitor",
        "list_all_datastores",
        "list",
        "name",
        ("type", "free_gb", "total_gb", "accessible", "vm_count"),
        stable="url",
    ),
    TargetKind(
        "cluster",
        _VSPHERE,
        ("cluster_name", "cluster"),
        "monitor",
        "list_all_clusters",
        "list",
        "name",
        ("host_count", "drs_enabled", "ha_enabled"),
        named_by=(("create_cluster", "name"), ("delete_cluster", "name"), ("configure_cluster", "name")),
        creates=(("create_cluster", "name"),),
        stable="moid",
    ),
    TargetKind(
        "network",
        frozenset({"aiops"}),
        ("network_name", "portgroup"),
        "monitor",
        "list_all_networks",
        "list",
        "name",
        ("vm_count", "accessible"),
        named_by=(("create_dvs_portgroup", "name"),),
        creates=(("create_dvs_portgroup", "name"),),
    ),
    TargetKind(
        "segment",
        frozenset({"nsx"}),
        ("segment_id",),
        "nsx",
        "get_segment",
        "get",
        "segment_id",
        ("display_name", "type", "admin_state", "transport_zone_path"),
        creates=(("create_segment", "segment_id"),),
    ),
    TargetKind(
        "tier-1 gateway",
        frozenset({"nsx"}),
        ("tier1_id",),
        "nsx",
        "get_tier1_gateway",
        "get",
        "tier1_id",
        ("display_name", "tier0_path", "ha_mode"),
        creates=(("create_tier1_gateway", "tier1_id"),),
    ),
    TargetKind(
        "tier-0 gateway",
        frozenset({"nsx"}),
        ("tier0_id",),
        "nsx",
        "get_tier0_gateway",
        "get",
        "tier0_id",
        ("display_name", "ha_mode"),
    ),
    TargetKind(
        "DFW policy",
        frozenset({"nsx-security"}),
        ("policy_id",),
        "nsx-security",
        "get_dfw_policy",
        "get",
        "policy_id",
        ("display_name", "category", "stateful", "sequence_number"),
        creates=(("create_dfw_policy", "policy_id"),),
    ),
    TargetKind(
        "NSX group",
        frozenset({"nsx-security"}),
        ("group_id",),
        "nsx-security",
        "get_group",
        "get",
        "group_id",
        ("display_name", "description"),
        creates=(("create_group", "group_id"),),
    ),
    TargetKind(
        "namespace",
        frozenset({"vks"}),
        ("namespace",),
        "vks",
        "get_namespace",
        "get",
        "name",
        ("config_status", "cluster", "storage_policies"),
        named_by=(("create_namespace", "name"), ("update_namespace", "name"), ("delete_namespace", "name")),
        creates=(("create_namespace", "name"),),
    ),
    TargetKind(
        "virtual service",
        frozenset({"avi"}),
        (),
        "avi",
        "get_virtual_service_status",
        "get",
        "name",
        ("enabled", "oper_status", "health_score"),
        named_by=(("set_virtual_service_enabled", "name"),),
        takes_target=False,
    ),
    TargetKind(
        "Aria resource",
        frozenset({"aria"}),
        ("resource_id",),
        "aria",
        "get_resource",
        "get",
        "resource_id",
        ("name", "resource_kind", "health", "maintenance"),
    ),
)

READ_TOOLS: Final = frozenset((k.read_skill, k.read_tool) for k in KINDS) | {
    # Extra reads of a VM: its snapshots, and finding it by its UUID after a rename.
    ("monitor", "list_vm_snapshots"),
    ("monitor", "list_virtual_machines"),
}


@dataclass(frozen=True)
class Named:
    """One object a step names: its kind, name and target, and whether the step creates it."""

    kind: str
    name: str
    target: str
    creates: bool

    @property
    def key(self) -> str:
        return f"{self.kind}|{self.target}|{self.name}"


def kind_of(kind: str) -> TargetKind:
    return next(k for k in KINDS if k.kind == kind)


def named_objects(skill: str, tool: str, params: Mapping[str, Any]) -> list[Named]:
    """The objects a step's resolved ``params`` name, in table order (at most ``MAX_NAMED``)."""
    target = params.get("target")
    where = target if isinstance(target, str) else ""
    found: list[Named] = []
    for row in KINDS:
        if skill not in row.skills:
            continue
        keys = list(row.params) + [p for t, p in row.named_by if t == tool]
        for key in keys:
            value = params.get(key)
            names = value if isinstance(value, list) else [value]
            created = (tool, key) in row.creates
            for name in names:
                if isinstance(name, str) and name.strip():
                    named = Named(row.kind, name.strip(), where, created)
                    if named not in found:
                        found.append(named)
    return found[:MAX_NAMED]


def find_item(payload: Any, key: str, name: str) -> tuple[Mapping[str, Any] | None, bool] | None:
    """The item of a list answer whose ``key`` is ``name`` and whether the list was cut short;
    None when the answer holds no list at all (then nothing can be said about the object)."""
    items: Any = None
    if isinstance(payload, Mapping):
        items = next(
            (payload[k] for k in ("items", "result", "data") if isinstance(payload.get(k), list)), None
        )
    elif isinstance(payload, list):
        items = payload
    if items is None:
        return None
    truncated = isinstance(payload, Mapping) and bool(payload.get("truncated"))
    for item in items:
        if isinstance(item, Mapping) and str(item.get(key, "")) == name:
            return item, truncated
    return None, truncated


def summary_of(row: TargetKind, data: Mapping[str, Any]) -> dict[str, Any]:
    """The row's summary fields present in ``data`` (scalars only), in the row's order."""
    source = data.get("object") if isinstance(data.get("object"), Mapping) else data
    assert isinstance(source, Mapping)
    out: dict[str, Any] = {}
    for name in row.fields:
        value = source.get(name)
        if isinstance(value, str | int | float | bool) and value != "":
            out[name] = value
    return out


_UNITS: Final = {
    "cpu": "{} vCPU",
    "memory_mb": "{} MB",
    "host": "host {}",
    "cpu_cores": "{} cores",
    "memory_gb": "{} GB memory",
    "free_gb": "{} GB free",
    "total_gb": "of {} GB",
    "host_count": "{} hosts",
    "esxi_version": "ESXi {}",
}
_FLAGS: Final = {"drs_enabled": "DRS", "ha_enabled": "HA", "stateful": "stateful", "enabled": "enabled"}


def _field(name: str, value: Any) -> str:
    if name == "accessible" and isinstance(value, bool):
        return "accessible" if value else "NOT accessible"
    if isinstance(value, bool):
        label = _FLAGS.get(name, name.replace("_", " "))
        return f"{label} {'on' if value else 'off'}"
    if name == "vm_count" and isinstance(value, int):
        return f"{value} VM{'' if value == 1 else 's'}"
    return _UNITS.get(name, "{}").format(value)


def state_line(t: Mapping[str, Any]) -> str:
    """``DC0_H0_VM0: poweredOn, 1 vCPU, 32 MB, host DC0_H0, snapshot baseline`` for a VM;
    ``host DC0_H0: connected, poweredOn, 2 cores, …`` for other kinds (or why it is not known)."""
    kind = str(t.get("kind") or "vm")
    name = f"{t.get('name', '')}" if kind == "vm" else f"{kind} {t.get('name', '')}"
    read = t.get("read")
    if read == "failed":
        return f"{name}: read FAILED ({t.get('error', '')})"
    if read == "not_found":
        return f"{name}: {t.get('note') or 'not found'}"
    if read != "ok":
        return f"{name}: state not known" + (f" ({t['error']})" if t.get("error") else "")
    summary = t.get("summary") if isinstance(t.get("summary"), Mapping) else {}
    assert isinstance(summary, Mapping)
    parts = [_field(k, v) for k, v in summary.items()]
    if kind == "vm":
        if not summary.get("power_state"):
            parts.insert(0, "power state unknown")
        snaps = list(t.get("snapshots") or [])
        parts.append(
            f"snapshot{'s' if len(snaps) != 1 else ''} {', '.join(snaps)}" if snaps else "no snapshots"
        )
    return f"{name}: {', '.join(parts) or 'found'}"
