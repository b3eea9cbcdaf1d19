"""A capture of a vCenter as files under the Pilot home (the twin capture tests)."""

from __future__ import annotations

import json
from pathlib import Path

from vmware_pilot.twin.captures import digest_of

VM_XML = """<ObjectContent>
  <obj type="VirtualMachine">vm-57</obj>
  <propSet><name>name</name><val xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="xsd:string">DC0_H0_VM0</val></propSet>
  <propSet><name>parent</name><val type="Folder">group-v3</val></propSet>
  <propSet><name>runtime</name><val><host type="HostSystem">host-21</host><connectionState>connected</connectionState><powerState>poweredOn</powerState></val></propSet>
  <propSet><name>guest</name><val><toolsRunningStatus>guestToolsNotRunning</toolsRunningStatus></val></propSet>
  <propSet><name>snapshot</name><val><rootSnapshotList><name>lab-base</name><childSnapshotList><name>second</name></childSnapshotList></rootSnapshotList></val></propSet>
</ObjectContent>
"""


def make_capture(pilot_home: Path, capture_id: str, at: str, *, readable: bool = True) -> Path:
    folder = pilot_home / "twins" / capture_id
    objects = folder / "objects"
    objects.mkdir(parents=True)
    if readable:
        (objects / "0000-ServiceInstance-ServiceInstance.xml").write_text(
            "<ObjectContent><obj type='ServiceInstance'>ServiceInstance</obj></ObjectContent>"
        )
    (objects / "0001-VirtualMachine-vm-57.xml").write_text(VM_XML)
    digest, count = digest_of(objects)
    record = {
        "id": capture_id,
        "target": "lab",
        "vcenter": "vc:443",
        "at": at,
        "objects": count,
        "digest": digest,
    }
    (folder / "capture.json").write_text(json.dumps(record))
    return folder
