"""Finding the twin's binaries: the one a setting names, else the lab's build, else one on PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

from vmware_pilot.errors import PilotError

__all__ = ["LAB_BIN", "TwinError", "available", "find_binary"]

# Where scripts/lab/setup.sh builds vcsim-twin and govc-twin in a source checkout.
LAB_BIN: Final = Path(__file__).resolve().parents[3] / ".lab" / "bin"
_SETTING: Final = {"vcsim": "VMWARE_PILOT_TWIN_VCSIM", "govc": "VMWARE_PILOT_TWIN_GOVC"}


class TwinError(PilotError):
    """A capture or a twin that cannot be made or read: the message says why, the hint what to do."""


def find_binary(kind: str, named: str = "") -> str:
    """The ``vcsim`` or ``govc`` to run: ``named`` (a setting), ``.lab/bin/<kind>-twin``, ``<kind>`` on PATH."""
    if named:
        path = shutil.which(named) or (named if os.access(named, os.X_OK) else None)
        if path is None:
            raise TwinError(
                f"{_SETTING[kind]} names '{named}', which is not an executable",
                hint=f"Point {_SETTING[kind]} at a {kind} binary, or unset it.",
            )
        return path
    built = LAB_BIN / f"{kind}-twin"
    if os.access(built, os.X_OK):
        return str(built)
    found = shutil.which(kind)
    if found:
        return found
    raise TwinError(
        f"no {kind} found (not {_SETTING[kind]}, not {built}, not on PATH)",
        hint=f"Run `bash scripts/lab/setup.sh` (builds {kind}-twin from Debian's govmomi) or set {_SETTING[kind]}.",
    )


def available(kind: str, named: str = "") -> bool:
    try:
        find_binary(kind, named)
    except PilotError:
        return False
    return True
