"""MCP resources: read-only views of workflows, templates and the catalog under ``pilot://``.

| URI                                  | content                                   | readable with the role of |
|--------------------------------------|-------------------------------------------|---------------------------|
| ``pilot://workflows/{workflow_id}``  | the ``get_workflow_status`` view          | get_workflow_status       |
| ``pilot://workflows/{id}/audit``     | the stored audit events, oldest first     | get_workflow_status       |
| ``pilot://templates``                | ``list_workflows``' template list         | list_workflows            |
| ``pilot://templates/{name}``         | one template with parameters and example  | list_workflows            |
| ``pilot://catalog``                  | the ``get_skill_catalog`` payload         | get_skill_catalog         |

Each is JSON (``application/json``) built by the same service call as its tool, so masking is
the tools'. Lists show only what the caller's role may read. Errors are JSON-RPC errors: an
unknown URI or workflow is ``RESOURCE_NOT_FOUND`` (-32002) on a 2025-11-25 connection and
``INVALID_PARAMS`` (-32602) on a 2026-07-28 one (the revision retired -32002: ``not_found_code``),
a read the role forbids ``INVALID_REQUEST``; each carries ``uri`` and a ``hint`` in ``data``.

On 2026-07-28 a read of the templates or the catalog carries a cache hint (``ttlMs``,
``cacheScope``: ``cache_hint``); a workflow's view carries none (it changes at any moment:
``subscriptions/listen`` tells when). The 2025-11-25 wire has no such fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, Resource, ResourceTemplate
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from vmware_pilot.card import ApprovalCard
from vmware_pilot.errors import PilotError, WorkflowNotFound
from vmware_pilot.server.results import dump_json

if TYPE_CHECKING:  # the engine is imported when the app is built, not at start-up
    from vmware_pilot.engine.service import PilotService

__all__ = [
    "RESOURCE_NOT_FOUND",
    "Refusal",
    "cache_hint",
    "canonical_uri",
    "not_found_code",
    "register_resources",
    "workflow_of",
]

RESOURCE_NOT_FOUND = -32002
"""A resource that does not exist, on 2025-11-25 (retired by 2026-07-28: ``not_found_code``)."""
JSON = "application/json"

Refusal = Callable[[str], PilotError | None]
"""The caller's refusal to see what a tool shows (``PilotMCPServer.read_refusal``)."""

_WORKFLOW = re.compile(r"pilot://workflows/([^/?#]+)")
_AUDIT = re.compile(r"pilot://workflows/([^/?#]+)/audit")
_TEMPLATE = re.compile(r"pilot://templates/([^/?#]+)")


@dataclass(frozen=True)
class _View:
    tool: str  # the tool whose role grants the read
    read: Callable[[], Any]


def not_found_code(protocol_version: str) -> int:
    """The JSON-RPC code of "no such resource" on a connection of ``protocol_version``:
    ``INVALID_PARAMS`` from 2026-07-28 on (SEP-2164), ``RESOURCE_NOT_FOUND`` before."""
    return INVALID_PARAMS if protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND


def cache_hint(uri: str, watch_interval: float) -> int | None:
    """How long (ms) a client may reuse a read of ``uri`` (None: no hint).

    The templates and the catalog are re-read by Pilot at every request (their stamps are checked
    each time), and change only by an operator's act (a template file saved, `catalog refresh`);
    a reuse for ``watch_interval`` keeps a client exactly as fresh as a subscriber, who is told
    of a change within that interval. A workflow changes at any moment: no hint."""
    if uri in {"pilot://templates", "pilot://catalog"} or _TEMPLATE.fullmatch(uri):
        return round(watch_interval * 1000)
    return None


def workflow_of(uri: str) -> str | None:
    """The workflow id a workflow or audit URI names (None for any other URI)."""
    found = _WORKFLOW.fullmatch(uri) or _AUDIT.fullmatch(uri)
    return unquote(found.group(1)) if found else None


def canonical_uri(uri: str) -> str | None:
    """The one spelling of a workflow or audit URI (its id percent-encoded only where it must
    be): ``pilot://workflows/%77f-1`` and ``pilot://workflows/wf%2D1`` are ``pilot://workflows/wf-1``.
    None for any other URI."""
    workflow_id = workflow_of(uri)
    if workflow_id is None:
        return None
    tail = "/audit" if _AUDIT.fullmatch(uri) else ""
    return f"pilot://workflows/{quote(workflow_id, safe='')}{tail}"


def _audit(service: PilotService, workflow_id: str) -> dict[str, Any]:
    return service.records.audit_trail(workflow_id)  # WorkflowNotFound for an unknown id


def _view(service: PilotService, uri: str) -> _View | None:
    if uri == "pilot://templates":
        return _View(
            "list_workflows", lambda: {"templates": [t.model_dump() for t in service.templates.listing()]}
        )
    if uri == "pilot://catalog":
        return _View("get_skill_catalog", service.get_skill_catalog)
    if found := _AUDIT.fullmatch(uri):
        audited = unquote(found.group(1))
        return _View("get_workflow_status", lambda: _audit(service, audited))
    if found := _WORKFLOW.fullmatch(uri):
        workflow_id = unquote(found.group(1))
        return _View("get_workflow_status", lambda: service.get_workflow_status(workflow_id))
    if found := _TEMPLATE.fullmatch(uri):
        name = unquote(found.group(1))
        return _View("list_workflows", lambda: service.templates.describe(name))
    return None


def _error(code: int, message: str, uri: str, hint: str) -> MCPError:
    return MCPError(code=code, message=message, data={"uri": uri, "hint": hint})


def readable(service: PilotService, refusal: Refusal, uri: str, missing: int) -> _View:
    """The view behind ``uri`` when the caller may read it; MCPError otherwise (``missing``: the
    code of an unknown URI, ``not_found_code``)."""
    view = _view(service, uri)
    if view is None:
        raise _error(
            missing,
            f"Unknown resource: {uri[:200]}",
            uri[:200],
            "resources/list and resources/templates/list show the pilot:// URIs this server has.",
        )
    refused = refusal(view.tool)
    if refused is not None:
        raise _error(INVALID_REQUEST, refused.message, uri, refused.hint)
    return view


def _dump(view: _View, uri: str, missing: int) -> str:
    try:
        return dump_json(view.read())
    except WorkflowNotFound as exc:
        raise _error(missing, exc.message, uri, exc.hint) from None
    except PilotError as exc:
        code = missing if uri.startswith("pilot://templates/") else INVALID_REQUEST
        raise _error(code, exc.message, uri, exc.hint) from None


def _templates() -> list[tuple[ResourceTemplate, str]]:
    return [
        (
            ResourceTemplate(
                uri_template="pilot://workflows/{workflow_id}",
                name="workflow",
                description="A workflow's state, steps, gates and audit log (as get_workflow_status). "
                "Subscribe to be told when it changes.",
                mime_type=JSON,
            ),
            "get_workflow_status",
        ),
        (
            ResourceTemplate(
                uri_template="pilot://workflows/{workflow_id}/audit",
                name="workflow-audit",
                description="A workflow's tamper-evident audit events, oldest first, and whether the "
                "hash chain is intact.",
                mime_type=JSON,
            ),
            "get_workflow_status",
        ),
        (
            ResourceTemplate(
                uri_template="pilot://templates/{name}",
                name="template",
                description="One workflow template: description, parameters and an example call.",
                mime_type=JSON,
            ),
            "list_workflows",
        ),
    ]


def _static() -> list[tuple[Resource, str]]:
    return [
        (
            Resource(
                uri="pilot://templates",
                name="templates",
                description="Every workflow template (built-in and YAML) with parameters and an example.",
                mime_type=JSON,
            ),
            "list_workflows",
        ),
        (
            Resource(
                uri="pilot://catalog",
                name="catalog",
                description="The skills and tools workflow steps can use, with their risk levels.",
                mime_type=JSON,
            ),
            "get_skill_catalog",
        ),
    ]


def register_resources(
    lowlevel: Server[Any],
    service: PilotService,
    refusal: Refusal,
    card: ApprovalCard | None = None,
    watch_interval: float = 1.0,
) -> None:
    """Install resources/list, resources/templates/list and resources/read on ``lowlevel``
    (``watch_interval``: what the cache hints of the templates and the catalog are made of)."""

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourcesResult:
        listed = [r for r, tool in _static() if refusal(tool) is None]
        return types.ListResourcesResult(resources=[*listed, *(card.listing() if card else [])])

    async def list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourceTemplatesResult:
        templates = [t for t, tool in _templates() if refusal(tool) is None]
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        # The caller's role is resolved here, on the request; the store and the templates are read
        # in a worker thread (a changed template is parsed there, never on the event loop).
        uri = str(params.uri)
        if card is not None and (found := await card.read(uri)) is not None:
            return found  # the approval card (vmware_pilot.card): no data, every caller
        missing = not_found_code(ctx.protocol_version)
        view = readable(service, refusal, uri, missing)
        text = await anyio.to_thread.run_sync(_dump, view, uri, missing)
        contents: list[types.TextResourceContents | types.BlobResourceContents] = [
            types.TextResourceContents(uri=params.uri, text=text, mime_type=JSON)
        ]
        ttl = cache_hint(uri, watch_interval)
        if ttl is None:
            return types.ReadResourceResult(contents=contents)
        # Private: the same for every caller who may read it, but a read the role gates.
        return types.ReadResourceResult(contents=contents, ttl_ms=ttl, cache_scope="private")

    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler(
        "resources/templates/list", types.PaginatedRequestParams, list_resource_templates
    )
    lowlevel.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
