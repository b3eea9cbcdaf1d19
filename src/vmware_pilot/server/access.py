"""Per-caller access: who is calling, which tools they see and may call, and the four-eyes rule.

``PilotFastMCP`` resolves the caller on every request (the OS user on stdio, the token name or
OAuth subject over the network). With a role lookup configured, ``tools/list`` shows only the
tools the caller's role allows, and a call outside the role, or an approval the role forbids
(``approve: none``, or ``approve: others`` on a workflow the caller created or edited), is
refused with an error payload before the tool runs. Without a role lookup (stdio) every tool is available.

Calls never wait for each other, except quick writes to one existing workflow (``QUEUED_TOOLS``),
which take turns per workflow so many callers editing one draft never conflict. Runs, approvals
and rollbacks are kept one-at-a-time per workflow by the service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, ContentBlock
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Workflow
from vmware_pilot.errors import PilotError, WorkflowNotFound
from vmware_pilot.safety.duties import Role, approve_refusal, tool_refusal
from vmware_pilot.server.arguments import limit_refusal, schema_refusal, unknown_tool_refusal
from vmware_pilot.server.bounds import bound_refusal, long_strings
from vmware_pilot.server.results import to_result

__all__ = ["QUEUED_TOOLS", "ActorSource", "PilotFastMCP", "RoleOf"]

_log = logging.getLogger("vmware_pilot.server")

ActorSource = Callable[[], Actor]
"""The caller of the request being handled; raises ``PilotError`` when there is none."""
RoleOf = Callable[[Actor], Role]
"""The caller's role, looked up on every call; raises ``PilotError`` when it cannot be used."""
LoadWorkflow = Callable[[str], Workflow]

QUEUED_TOOLS = frozenset({"update_draft", "confirm_draft", "cancel_workflow"})

_APPROVE_HINT = (
    "Have someone whose role allows approving (approve: any, or approve: others for a workflow "
    "they did not create or edit) approve it."
)


class _HiddenToolNotice(logging.Filter):
    """Drop the SDK's warning that a called tool was not in the (role-filtered) tools/list."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Tool '%s' not listed")


class PilotFastMCP(FastMCP[Any]):
    """FastMCP whose tool list and tool calls are filtered by the caller's role."""

    def __init__(
        self,
        *args: Any,
        caller: ActorSource,
        role_of: RoleOf | None,
        load_workflow: LoadWorkflow,
        **kwargs: Any,
    ) -> None:
        self._caller = caller
        self._role_of = role_of
        self._load_workflow = load_workflow
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}
        super().__init__(*args, **kwargs)
        # Calls to hidden or unknown tools are refused with a payload; the SDK's warning (which
        # would repeat the caller's tool name whatever its length) is only noise.
        lowlevel = logging.getLogger("mcp.server.lowlevel.server")
        if not any(isinstance(f, _HiddenToolNotice) for f in lowlevel.filters):
            lowlevel.addFilter(_HiddenToolNotice())

    def _role(self) -> tuple[Actor, Role]:
        assert self._role_of is not None
        actor = self._caller()
        return actor, self._role_of(actor)

    def read_refusal(self, tool: str) -> PilotError | None:
        """Why the caller may not see what ``tool`` shows (resources, completions), or None."""
        if self._role_of is None:
            return None
        try:
            actor, role = self._role()
        except PilotError as exc:
            return exc
        reason = tool_refusal(role, tool)
        if reason is None:
            return None
        return PilotError(
            f"{reason}.",
            hint=f"Ask an administrator for a role that includes {tool} (`vmware-pilot token set-role "
            f"{actor.name} ROLE`).",
            role=role.name,
        )

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if self._role_of is None:
            return tools
        try:
            _, role = self._role()
        except PilotError as exc:
            _log.warning("tools/list refused: %s", exc.message)
            return []
        return [t for t in tools if role.may_call(t.name)]

    async def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> Sequence[ContentBlock] | dict[str, Any]:
        result = await self._call(name, arguments)
        # Refusals (a truthy ``error``) are kept small. A run, approval or rollback that ended
        # with an error and an ``outcome`` is a result: only the inputs it quotes are cut.
        payload = result.structuredContent if isinstance(result, CallToolResult) else None
        if payload and payload.get("error"):
            squeeze = "outcome" not in payload
            result = to_result(bound_refusal(payload, long_strings(arguments), squeeze=squeeze))
        # FastMCP passes a CallToolResult through unchanged (its declared type is narrower).
        return result  # type: ignore[return-value]

    async def _call(
        self, name: str, arguments: dict[str, Any]
    ) -> CallToolResult | Sequence[ContentBlock] | dict[str, Any]:
        """The tool's result, or the refusal of a call that fails the door or the caller's role."""
        tool = self._tool_manager.get_tool(name)
        refusal = (
            unknown_tool_refusal(name, (t.name for t in self._tool_manager.list_tools()))
            if tool is None
            else limit_refusal(arguments)
        )
        if refusal is not None:
            return to_result(refusal)
        if self._role_of is not None:
            denied = await self._refusal(name, arguments)
            if denied is not None:
                return denied
        try:
            workflow_id = arguments.get("workflow_id")
            if name in QUEUED_TOOLS and isinstance(workflow_id, str):
                async with self._turn(workflow_id):
                    return await super().call_tool(name, arguments)
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return to_result(schema_refusal(name, exc.__cause__))
            raise

    @contextlib.asynccontextmanager
    async def _turn(self, workflow_id: str) -> AsyncIterator[None]:
        """Wait for the other queued calls on this workflow; the lock is dropped when unused."""
        lock, users = self._turns.get(workflow_id, (asyncio.Lock(), 0))
        self._turns[workflow_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[workflow_id]
            if users == 1:
                del self._turns[workflow_id]
            else:
                self._turns[workflow_id] = (lock, users - 1)

    async def _refusal(self, name: str, arguments: dict[str, Any]) -> CallToolResult | None:
        """The error result refusing this call, or None when the caller may make it."""
        try:
            actor, role = self._role()
        except PilotError as exc:
            return to_result(exc.payload())
        reason = tool_refusal(role, name)
        how = (
            "a group of yours mapped to it in the roles file"
            if actor.kind == "oidc"
            else f"`vmware-pilot token set-role {actor.name} ROLE`"
        )
        hint = f"Ask an administrator for a role that includes {name} ({how}), or use a tool this role lists."
        if reason is None and name == "approve" and role.approve != "any":
            workflow_id = arguments.get("workflow_id")
            if not isinstance(workflow_id, str):
                return None  # argument validation reports it
            try:
                wf = self._load_workflow(workflow_id)
            except WorkflowNotFound:
                return None  # the tool reports the unknown id in the contract's words
            except PilotError as exc:
                return to_result(exc.payload())
            reason, hint = approve_refusal(role, actor, wf), _APPROVE_HINT
        if reason is None:
            return None
        _log.warning("refused %s for %s (role %s): %s", name, actor.label, role.name, reason)
        return to_result({"error": f"{reason}.", "role": role.name, "tool": name, "hint": hint})
