"""The overlay: what to do to a twin so its objects are as the gate just read them, not as they
were captured.

``overlay_plan`` compares the gate's reads (the inspection's ``targets`` and the skills' previews)
with the capture's facts (``captures.inventory_facts``) and answers the ``govc-twin`` commands that
close the gap, in an order the simulator accepts:

- a host the gate read out of maintenance mode leaves it (``host.maintenance -exit``), first, so
  a VM can be moved onto it;
- a VM the gate read on another host is moved there (``vm.migrate -host``);
- a VM's power state as read (``vm.power``; always, as before: it is what the gate saw);
- a VM's snapshots: those the twin has and the gate did not read are removed, those the gate read
  and the twin lacks are taken (``snapshot.remove`` / ``snapshot.create``; names only, the tree's
  shape is not rebuilt); only when the gate's snapshot read succeeded;
- a host the gate read in maintenance mode enters it (``host.maintenance -enter``), last.

The gate reads a host's maintenance mode only through aiops' previews (``migrate_vm``'s
``blast_radius.target_host.in_maintenance_mode``, ``remove_cluster_host``'s
``blast_radius.maintenance_mode``): monitor's host list does not say it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["OverlayOp", "maintenance_reads", "overlay_plan"]

_POWER: Final = {"poweredOn": "-on", "poweredOff": "-off"}


@dataclass(frozen=True)
class OverlayOp:
    """One ``govc-twin`` command (``args``) and what it puts on the twin, as the record says it."""

    args: tuple[str, ...]
    says: str


def _radii(previews: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for preview in previews.values():
        payload = preview.get("payload") if isinstance(preview, Mapping) else None
        radius = payload.get("blast_radius") if isinstance(payload, Mapping) else None
        if isinstance(radius, Mapping):
            yield radius


def maintenance_reads(previews: Mapping[str, Any]) -> dict[str, bool]:
    """Host name → in maintenance mode, as the gate's previews read it (later previews win)."""
    found: dict[str, bool] = {}
    for radius in _radii(previews):
        target = radius.get("target_host")
        if isinstance(target, Mapping) and isinstance(target.get("in_maintenance_mode"), bool):
            found[str(target.get("name") or "")] = target["in_maintenance_mode"]
        if isinstance(radius.get("host"), str) and isinstance(radius.get("maintenance_mode"), bool):
            found[radius["host"]] = radius["maintenance_mode"]
    found.pop("", None)
    return found


def _by_name(facts: Mapping[str, Mapping[str, Any]], kind: str) -> dict[str, Mapping[str, Any]]:
    return {str(f.get("name")): f for f in facts.values() if f.get("type") == kind}


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(str(value).lower()) if value is not None else None


def overlay_plan(
    targets: Sequence[Mapping[str, Any]],
    previews: Mapping[str, Any],
    facts: Mapping[str, Mapping[str, Any]],
) -> list[OverlayOp]:
    """The commands that put the gate's reads (``targets``, ``previews``) on a twin whose objects
    are ``facts`` (the capture's). An object the capture does not hold is left alone: the step
    that names it meets the twin as captured."""
    vms = _by_name(facts, "VirtualMachine")
    hosts = _by_name(facts, "HostSystem")
    host_names = {
        ref.partition(":")[2]: str(f.get("name")) for ref, f in facts.items() if f.get("type") == "HostSystem"
    }
    read_vms = [
        t
        for t in targets
        if t.get("kind") == "vm" and t.get("read") == "ok" and str(t.get("name") or "") in vms
    ]
    maintenance = {h: m for h, m in maintenance_reads(previews).items() if h in hosts}
    first: list[OverlayOp] = []
    moves: list[OverlayOp] = []
    power: list[OverlayOp] = []
    snaps: list[OverlayOp] = []
    last: list[OverlayOp] = []
    for host, wanted in sorted(maintenance.items()):
        if _flag(hosts[host].get("maintenance_mode")) == wanted:
            continue
        if wanted:
            last.append(OverlayOp(("host.maintenance", "-enter", host), f"host {host} in maintenance mode"))
        else:
            first.append(
                OverlayOp(("host.maintenance", "-exit", host), f"host {host} out of maintenance mode")
            )
    for t in read_vms:
        name = str(t["name"])
        captured = vms[name]
        host = str(t.get("host") or "")
        if host and host in hosts and host_names.get(str(captured.get("host") or "")) != host:
            moves.append(OverlayOp(("vm.migrate", "-host", host, name), f"{name} on host {host}"))
        state = str(t.get("power_state") or "")
        if state in _POWER:
            power.append(OverlayOp(("vm.power", _POWER[state], "-force", name), f"{name} {state}"))
        if str(t.get("error") or "").startswith("snapshots not read") or not isinstance(
            t.get("snapshots"), list
        ):
            continue
        read = [str(s) for s in t["snapshots"]]
        had = [str(s) for s in captured.get("snapshots") or []]
        for gone in dict.fromkeys(s for s in had if s not in read):
            snaps.append(OverlayOp(("snapshot.remove", "-vm", name, gone), f"{name} snapshot {gone} removed"))
        for new in dict.fromkeys(s for s in read if s not in had):
            snaps.append(OverlayOp(("snapshot.create", "-vm", name, new), f"{name} snapshot {new} taken"))
    return [*first, *moves, *power, *snaps, *last]
