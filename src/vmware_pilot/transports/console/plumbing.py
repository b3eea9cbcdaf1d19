"""What the console's pages share: the signed-in caller, the refusal that ends a request, and the
reads each page needs the role to have."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from vmware_pilot.domain.actor import Actor
from vmware_pilot.safety.duties import Role
from vmware_pilot.transports.console.sessions import Session

__all__ = ["GATE", "LIST", "REASON_MAX", "STATUS", "Caller", "Denied", "RoleOf", "requested_id", "safe_next"]

RoleOf = Callable[[Actor], Role]
# What each page shows is what these tools show: the role needs one of them (safety.roles.read_refusal).
LIST: Final = ("list_workflows",)
STATUS: Final = ("get_workflow_status",)
GATE: Final = ("get_workflow_status", "approve")
# The longest reason or comment kept from a form.
REASON_MAX: Final = 2000


@dataclass(frozen=True)
class Caller:
    """The signed-in person as of this request: the session (its actor as it stands now) and role."""

    session: Session
    role: Role

    @property
    def actor(self) -> Actor:
        return self.session.actor


class Denied(Exception):
    """Why a request with a session may not go on: the response to send instead."""

    def __init__(self, response: Response) -> None:
        super().__init__()
        self.response = response


def requested_id(request: Request) -> str:
    """The workflow id in the request's path."""
    return str(request.path_params["workflow_id"])


def safe_next(path: str) -> str:
    """Only a console path is followed after sign-in (never another site)."""
    return path if path.startswith("/console/") and not path.startswith("//") and "\\" not in path else ""
