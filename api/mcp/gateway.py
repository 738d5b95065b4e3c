"""Gateway mode: the downstream servers' tools, as agents see them through the ledger.

Each gated tool (``[[mcp.tool]]``) with a build this process hosts is listed
under its own name with the downstream's input schema; calling it is
``propose_action`` of its capability (the actor: ``_meta``
``execution-ledger/actor``, else the configured ``default_actor``; the
idempotency key: ``_meta`` ``execution-ledger/idempotency-key``). The real
tool runs later, once, through the ``mcp`` executor. A server's other tools
are hidden (``ungated = "hide"``, the default) or passed through as they are
(``ungated = "pass"``): listed from the server when asked, and each call
forwarded unchanged, outside the ledger.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.executors.loader import read_mcp_servers
from adapters.executors.mcp import McpExecutor
from adapters.executors.mcp_client import fetch_offer, session
from adapters.executors.mcp_config import RESERVED_TOOLS, McpServerConfig
from api.mcp.tools import McpContext
from domain.errors import InvalidInput

log = logging.getLogger(__name__)
ACTOR_META_KEY = "execution-ledger/actor"
KEY_META_KEY = "execution-ledger/idempotency-key"
GATED_NOTE = (
    "Gated by the execution ledger: a call is proposed to an actor for approval and "
    "answers a proposal id; the tool runs once, after approval (see get_action_status)."
)


@dataclass
class Gateway:
    """The downstream side of one ``ledger mcp`` process."""

    ctx: McpContext
    servers: list[McpServerConfig] = field(default_factory=list)

    @classmethod
    def of(cls, ctx: McpContext, environ: Mapping[str, str] | None = None) -> Gateway:
        settings = ctx.ledger.settings
        return cls(ctx, read_mcp_servers(settings, os.environ if environ is None else environ))

    def gated(self) -> dict[str, McpExecutor]:
        """The current build of each gated tool this process hosts, by tool name."""
        found: dict[str, McpExecutor] = {}
        for entry in self.ctx.ledger.registry.entries():
            executor = self.ctx.ledger.registry.get(entry.capability, entry.build_digest)
            if isinstance(executor, McpExecutor) and not entry.draining:
                found.setdefault(executor.gated.tool.name, executor)
        return found

    async def passed_through(self) -> dict[str, tuple[McpServerConfig, dict[str, Any]]]:
        """The ungated tools of ``ungated = "pass"`` servers, as they list them now
        (a server that does not answer lists nothing)."""
        gated = self.gated()
        found: dict[str, tuple[McpServerConfig, dict[str, Any]]] = {}
        for config in self.servers:
            if config.entry.ungated != "pass":
                continue
            try:
                offer = await fetch_offer(config)
            except Exception as exc:
                log.warning("gateway: %s did not answer (%s)", config.label, type(exc).__name__)
                continue
            mine = {tool.name for tool in config.entry.tool}
            for name, tool in offer.tools.items():
                if name in mine or name in gated or name in RESERVED_TOOLS or name in found:
                    continue
                found[name] = (
                    config,
                    {
                        "name": name,
                        "description": tool.description,
                        "input_schema": tool.input_schema,
                    },
                )
        return found

    def gated_tool_listing(self) -> list[dict[str, Any]]:
        """How each gated tool is listed to agents."""
        return [
            {
                "name": name,
                "description": f"{GATED_NOTE} {executor.gated.description or ''}".strip(),
                "input_schema": executor.gated.input_schema,
            }
            for name, executor in sorted(self.gated().items())
        ]

    def as_proposal(
        self, executor: McpExecutor, arguments: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``propose_action``'s arguments for a call of a gated tool."""
        actor = meta.get(ACTOR_META_KEY) or self.ctx.config.default_actor
        if not isinstance(actor, str):
            raise InvalidInput(
                f"_meta {ACTOR_META_KEY}: name the actor to ask (no default_actor is configured)"
            )
        args: dict[str, Any] = {
            "capability": executor.capability,
            "content": dict(arguments),
            "actor": actor,
        }
        key = meta.get(KEY_META_KEY)
        if isinstance(key, str):
            args["idempotency_key"] = key
        return args

    async def forward(
        self, config: McpServerConfig, name: str, arguments: Mapping[str, Any]
    ) -> Any:
        """One call of a passed-through tool, unchanged (its result as the server gave it)."""
        seconds = config.entry.timeout_seconds
        async with session(config, seconds) as opened:
            return await opened.call_tool(name, dict(arguments))
