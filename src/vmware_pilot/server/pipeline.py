"""The call pipeline: every tool call from an MCP client, from its name to its framed result.

``PilotMCPServer`` resolves the caller on every request (the OS user on stdio, the token name or
OAuth subject over the network). With a role lookup configured, ``tools/list`` shows only the
tools the caller's role allows, and the role goes with every call (``call_role``). A read tool
outside the role is refused here (``AccessRefused``, ``safety.roles``) before it runs; a tool
that changes something passes the role to the service in its request (``engine.requests``), and
the service alone decides, once per call, whatever the door (the role's tools, and for an approval
the approve rule: ``approve: none``, or ``approve: others`` on a workflow the caller created or
edited). Without a role lookup (stdio) every tool is available.

Every refusal of a call, whoever raises it (the door in ``server.arguments``, the role check here,
the engine), is a ``PilotError`` that ``call_tool`` turns into a result in one place
(``server.errors.refusal_result``); a tool's own result is framed by ``server.errors.tool_result``.

A server may offer fewer tools (``server.exposure``): one not offered is neither listed nor
callable, and a call to it gets the answer of an unknown tool. Identical write calls repeated too
often by one caller are refused (``server.runaway``); reads never are.

Calls never wait for each other, except quick writes to one existing workflow (the tool table's
``queued`` tools), which take turns per workflow so many callers editing one draft never conflict.
Runs, approvals and rollbacks are kept one-at-a-time per workflow by the service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from vmware_pilot import telemetry
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.safety import roles
from vmware_pilot.safety.duties import Role
from vmware_pilot.server import sdk
from vmware_pilot.server.arguments import check_limits, schema_refusal, unknown_tool_refusal
from vmware_pilot.server.errors import refusal_result, tool_result, unexpected_failure
from vmware_pilot.server.runaway import RunawayBreaker
from vmware_pilot.tooltable import TOOL_NAMES, spec_of

if TYPE_CHECKING:
    from vmware_pilot.server.tasks import TasksExtension

__all__ = ["ActorSource", "PilotMCPServer", "RoleOf"]

_log = logging.getLogger("vmware_pilot.server")

ActorSource = Callable[[], Actor]
"""The caller of the request being handled; raises ``PilotError`` when there is none."""
RoleOf = Callable[[Actor], Role]
"""The caller's role, looked up on every call; raises ``PilotError`` when it cannot be used."""
# The caller's role as the pipeline looked it up for the tool call in flight (None: no roles).
_CALL_ROLE: ContextVar[Role | None] = ContextVar("vmware_pilot_call_role", default=None)


class PilotMCPServer(MCPServer[Any]):
    """``MCPServer`` whose tool list and tool calls are filtered by the caller's role."""

    def __init__(
        self,
        *args: Any,
        tools: Callable[[], list[Tool]],
        caller: ActorSource,
        role_of: RoleOf | None,
        offered: frozenset[str] = frozenset(TOOL_NAMES),
        runaway: RunawayBreaker | None = None,
        extensions: Sequence[Extension] = (),
        tasks: TasksExtension | None = None,
        **kwargs: Any,
    ) -> None:
        # The tools are built when first listed or called: building them (argument models, output
        # schemas, the result models) is a good part of a start-up, and `initialize` needs none.
        self._build_tools: Callable[[], list[Tool]] | None = tools
        self._caller = caller
        self._role_of = role_of
        self._offered = offered
        self._runaway = runaway
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}
        self.tasks = tasks
        super().__init__(*args, extensions=[*extensions, *([tasks] if tasks else [])], **kwargs)

    async def drain(self) -> None:
        """Wait for the calls still carried for tasks (``server.tasks``): a transport shutting down
        awaits it before the service drains, so each task's result is recorded on its row."""
        if self.tasks is not None:
            await self.tasks.drain()

    def _build_tools_once(self) -> None:
        if self._build_tools is not None:
            build, self._build_tools = self._build_tools, None
            sdk.add_tools(self, build())

    @staticmethod
    def call_role() -> Role | None:
        """The role of the caller of the tool call in flight (None: this server knows no roles)."""
        return _CALL_ROLE.get()

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
        return roles.read_refusal(actor, role, (tool,))

    async def list_tools(self) -> list[MCPTool]:
        self._build_tools_once()
        tools = [t for t in await super().list_tools() if t.name in self._offered]
        if self._role_of is None:
            return tools
        try:
            _, role = self._role()
        except PilotError as exc:
            _log.warning("tools/list refused: %s", exc.message)
            return []
        return [t for t in tools if role.may_call(t.name)]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        context = context or Context(mcp_server=self)
        self._note_context(arguments, context)
        try:
            result = await self._call(name, arguments, context)
        except PilotError as exc:
            telemetry.count("refusals", kind=str(exc.fields.get("refused") or type(exc).__name__))
            return refusal_result(exc, arguments)
        if isinstance(result, InputRequiredResult):  # a round of a multi-round-trip call (server.referral)
            return result
        return tool_result(result, arguments)

    def _note_context(self, arguments: dict[str, Any], context: Context[Any, Any]) -> None:
        """The request id, caller and workflow id of this call, for the log lines written meanwhile."""
        workflow_id = arguments.get("workflow_id")
        telemetry.workflow_id.set(workflow_id[:64] if isinstance(workflow_id, str) else "")
        try:
            telemetry.request_id.set(context.request_id)
        except ValueError:  # no request in flight (a direct call)
            telemetry.request_id.set("")
        try:
            telemetry.caller.set(self._caller().label)
        except PilotError:
            telemetry.caller.set("")

    async def _call(self, name: str, arguments: dict[str, Any], context: Context[Any, Any]) -> Any:
        """The tool's own result; raises ``PilotError`` for every refusal: an unknown tool,
        arguments over a limit or against the schema, the caller's role, the engine's rules."""
        self._build_tools_once()
        tool = sdk.find_tool(self, name)
        if tool is None or name not in self._offered:  # a hidden tool is answered as unknown
            raise unknown_tool_refusal(name, [n for n in TOOL_NAMES if n in self._offered])
        check_limits(arguments)
        if self._role_of is not None:
            self._check_role(name)
        # A multi-round-trip call's retry (its request state sealed by this server, for these
        # arguments) is the same call going on, not a repeat.
        if self._runaway is not None and context.request_state is None:
            actor = self._caller()
            self._runaway.check(f"{actor.kind}:{actor.name}", name, arguments)
        spec = spec_of(name)
        workflow_id = arguments.get("workflow_id")
        try:
            if spec is not None and spec.queued and isinstance(workflow_id, str):
                async with self._turn(workflow_id):
                    return await tool.run(arguments, context)
            return await tool.run(arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # the tool functions raise no other (tools.py)
                raise schema_refusal(name, cause) from None
            if isinstance(cause, PilotError):
                raise cause from None
            raise unexpected_failure(name, cause or exc, str(workflow_id or "")) from exc

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

    def _check_role(self, name: str) -> None:
        """Look the caller's role up (raising the lookup's refusal) and let it go with the call
        (``call_role``). A tool that changes something hands the role to the service in its
        request, and the service alone decides (``PilotService``); a read tool, which takes no
        request, is refused here with ``AccessRefused`` unless the role has it."""
        actor, role = self._role()
        spec = spec_of(name)
        refused = roles.call_refusal(actor, role, name) if spec is None or spec.effect == "read" else None
        if refused is not None:
            _log.warning("refused %s for %s (role %s): %s", name, actor.label, role.name, refused.message)
            raise refused
        _CALL_ROLE.set(role)
