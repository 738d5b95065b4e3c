"""The MCP server (the SDK's lowlevel ``Server``): its tools, who calls them, and
the two transports.

Over stdio the client is the process that started ``ledger mcp``: it is
trusted as the configured proposer (``proposer`` in the file). Over streamable
HTTP every request carries a bearer token, verified exactly as the HTTP API
verifies it (``api.http.auth``); only a ``proposer`` token is let in (any other
role is refused with 403, a missing or bad token with 401). Every tool answer
is JSON (``structured_content``, and the same text); a refusal is a tool
error whose ``error`` is the HTTP API's code for it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from anyio import to_thread

from api.mcp.gateway import Gateway
from api.mcp.status import MAX_WAIT_SECONDS, get_action_status
from api.mcp.tools import McpContext, list_capabilities, propose_action
from api.service.principal import Principal, Role
from domain.errors import LedgerError

log = logging.getLogger(__name__)
SERVER_NAME = "execution-ledger"
INSTRUCTIONS = (
    "Propose external actions for a person's approval: list_capabilities says what can be "
    "proposed and to whom, propose_action asks the actor in their own channel, and "
    "get_action_status tells how it went (it can wait up to 30 s). An approved action runs "
    "once, whatever is retried."
)


def own_tools() -> list[dict[str, Any]]:
    """The ledger's three tools: names, descriptions, input schemas."""
    return [
        {
            "name": "list_capabilities",
            "description": "The capabilities that can be proposed, each with its content "
            "schema, delivery mode and availability, and the actors proposals can go to.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        {
            "name": "propose_action",
            "description": "Propose one action to an actor for approval. The actor is asked "
            "in their own channel; the answer is the proposal id and awaiting_approval. Give "
            "an idempotency_key (your tool call's id): the same call again is the same proposal.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "capability": {"type": "string", "description": "From list_capabilities."},
                    "content": {
                        "type": "object",
                        "description": "The action's content: its capability's content_schema.",
                    },
                    "actor": {"type": "string", "description": "Who approves it."},
                    "target": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "base_revision": {"type": "string"},
                        },
                        "required": ["id", "base_revision"],
                        "additionalProperties": False,
                    },
                    "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 200},
                },
                "required": ["capability", "content", "actor"],
                "additionalProperties": False,
            },
        },
        {
            "name": "get_action_status",
            "description": "Where a proposal stands and, once approved, its execution's "
            "redacted status and receipt; wait_seconds (at most 30) waits until it is settled.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "proposal_id": {"type": "string"},
                    "wait_seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
                },
                "required": ["proposal_id"],
                "additionalProperties": False,
            },
        },
    ]


def content_schemas_in(tools: list[dict[str, Any]], offered: Mapping[str, Any]) -> None:
    """propose_action's input schema, with each capability's content schema bound to
    its name (``if capability == X then content: X's schema``)."""
    schema = next(t for t in tools if t["name"] == "propose_action")["input_schema"]
    schema["properties"]["capability"]["enum"] = sorted(offered)
    schema["allOf"] = [
        {
            "if": {"properties": {"capability": {"const": name}}, "required": ["capability"]},
            "then": {"properties": {"content": item["content_schema"]}},
        }
        for name, item in sorted(offered.items())
    ]


class ToolHandlers:
    """What the lowlevel server's ``on_list_tools`` and ``on_call_tool`` do."""

    def __init__(
        self, ctx: McpContext, gateway: Gateway, principal_of: Callable[[Any], Principal]
    ) -> None:
        self.ctx = ctx
        self.gateway = gateway
        self.principal_of = principal_of

    async def list_tools(self, request: Any) -> list[dict[str, Any]]:
        principal = self.principal_of(request)
        tools = own_tools()
        listing = await to_thread.run_sync(list_capabilities, self.ctx, principal)
        content_schemas_in(tools, {c["capability"]: c for c in listing["capabilities"]})
        tools.extend(self.gateway.gated_tool_listing())
        tools.extend(tool for _, tool in (await self.gateway.passed_through()).values())
        return tools

    async def call_tool(
        self, request: Any, name: str, arguments: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, Any]:
        """(the answer, None), or (None, a downstream result passed through as it is)."""
        principal = self.principal_of(request)
        own: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "list_capabilities": partial(
                to_thread.run_sync, list_capabilities, self.ctx, principal
            ),
            "propose_action": partial(
                to_thread.run_sync, propose_action, self.ctx, principal, arguments
            ),
            "get_action_status": partial(get_action_status, self.ctx, principal, dict(arguments)),
        }
        if name in own:
            return await own[name](), None
        gated = self.gateway.gated().get(name)
        if gated is not None:
            args = self.gateway.as_proposal(gated, arguments, meta)
            answer = await to_thread.run_sync(propose_action, self.ctx, principal, args)
            return answer, None
        passed = (await self.gateway.passed_through()).get(name)
        if passed is not None:
            return None, await self.gateway.forward(passed[0], name, arguments)
        raise UnknownTool()


class UnknownTool(LedgerError):
    """No tool of that name is offered here."""

    code = "unknown_tool"
    default_detail = "No tool of that name is offered here (see tools/list)."


def build_server(handlers: ToolHandlers) -> Any:
    """The SDK's lowlevel server over ``handlers``."""
    from mcp import types
    from mcp.server import Server, ServerRequestContext

    async def on_list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = await handlers.list_tools(ctx.request)
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    async def on_call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            answer, passed = await handlers.call_tool(
                ctx.request, params.name, params.arguments or {}, dict(ctx.meta or {})
            )
        except LedgerError as exc:
            return _result({"error": exc.code, "detail": exc.detail}, error=True)
        except Exception as exc:  # nothing of it reaches the agent; the type is logged
            log.warning("mcp tool %s failed: %s", params.name[:64], type(exc).__name__)
            return _result(
                {"error": "internal_error", "detail": "The tool failed; nothing is known of why."},
                error=True,
            )
        if passed is not None:
            result: types.CallToolResult = passed
            return result
        assert answer is not None
        return _result(answer)

    def _result(data: dict[str, Any], *, error: bool = False) -> types.CallToolResult:
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=data,
            is_error=error,
        )

    from api.version import package_version

    return Server(
        SERVER_NAME,
        version=package_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def stdio_principal(subject: str) -> Callable[[Any], Principal]:
    """Over stdio: the configured proposer, whatever the request."""
    principal = Principal(subject=subject, role=Role.PROPOSER)
    return lambda request: principal


def bearer_principal(request: Any) -> Principal:
    """Over HTTP: the principal the SDK's bearer middleware verified for this request."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    user = getattr(request, "user", None)
    if not isinstance(user, AuthenticatedUser):  # the route requires auth: never reached
        raise PermissionError("no verified bearer token")
    token = user.access_token
    return Principal(subject=token.client_id, role=Role((token.claims or {})["role"]))
