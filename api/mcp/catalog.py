"""What agents may propose: the capabilities ``ledger mcp`` offers, each on its
newest available build, with its content schema and what a proposal of it means.

A capability is offered when this process hosts a current build of it
(``GET /executors``) and either the ``ledger mcp`` file describes it
(``[[capability]]``) or it is a gated tool of a downstream server (its
``[[mcp.tool]]`` entry says the permission, effect and destination).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapters.bootstrap import Ledger
from adapters.executors.digest import code_identity
from adapters.executors.mcp import McpExecutor
from api.http.schemas.executors import ExecutorOut
from api.mcp.config import McpConfig
from api.service.executors import executor_listing
from api.service.principal import Principal
from domain.canonical import canonical_json
from domain.spec import sha256_tag

PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object"}
"""The content schema of a build that declares none: any JSON object."""


def content_schema(ledger: Ledger, item: ExecutorOut) -> dict[str, Any]:
    """THE content schema of one listed build, in one place: the one the executors
    listing carries (a gated MCP tool's is its input schema as the downstream
    server advertised it when the build was made); any object when it has none."""
    return dict(item.content_schema) if item.content_schema else dict(PERMISSIVE_SCHEMA)


def proposer_build() -> str:
    """The spec's ``plugin_build``: the code identity of this entry point."""
    return code_identity(
        "api.mcp.catalog", "api.mcp.tools", "api.mcp.status", "api.mcp.gateway", "api.mcp.server"
    )


@dataclass(frozen=True)
class Capability:
    """One capability as agents see it, and what its proposals bind."""

    capability: str
    build: ExecutorOut
    content_schema: dict[str, Any]
    permission: str
    effect: str
    destination: str
    description: str
    tool: str | None = None  # the gated downstream tool, for the gateway's capabilities
    executor: McpExecutor | None = field(default=None, compare=False, repr=False)

    @property
    def schema_digest(self) -> str:
        """The build's, as ``GET /executors`` lists it (what propose checks)."""
        return self.build.schema_digest

    @property
    def policy_digest(self) -> str:
        """What the proposer applied: this capability's meaning in the configuration."""
        return sha256_tag(
            canonical_json(
                {
                    "capability": self.capability,
                    "permission": self.permission,
                    "effect": self.effect,
                    "destination": self.destination,
                    "tool": self.tool or "",
                }
            )
        )

    def public(self) -> dict[str, Any]:
        """What ``list_capabilities`` shows of it."""
        return {
            "capability": self.capability,
            "description": self.description,
            "executor_build": self.build.executor_build,
            "delivery_mode": self.build.delivery_mode.value,
            "available": self.build.available,
            "content_schema": self.content_schema,
            "schema_digest": self.schema_digest,
            "permission": self.permission,
            "effect": self.effect,
            **({"tool": self.tool} if self.tool else {}),
        }


def catalog(ledger: Ledger, principal: Principal, config: McpConfig) -> dict[str, Capability]:
    """Every capability offered, on its newest build (available first), by name."""
    described = config.capabilities
    offered: dict[str, Capability] = {}
    for item in executor_listing(ledger, principal).items:
        if item.state != "current":
            continue
        known = offered.get(item.capability)
        if known is not None and (known.build.available or not item.available):
            continue  # the listing is newest first: keep the first available build
        executor = ledger.registry.get(item.capability, item.executor_build)
        gated = executor if isinstance(executor, McpExecutor) else None
        entry = described.get(item.capability)
        if gated is not None:
            tool = gated.gated.tool
            offered[item.capability] = Capability(
                item.capability,
                item,
                content_schema(ledger, item),
                tool.permission,
                tool.effect,
                tool.destination or gated.gated.server.entry.server,
                gated.gated.description or f"{tool.name} of {gated.gated.server.entry.server}",
                tool.name,
                gated,
            )
        elif entry is not None:
            offered[item.capability] = Capability(
                item.capability,
                item,
                content_schema(ledger, item),
                entry.permission,
                entry.effect,
                entry.destination,
                entry.description,
            )
    return offered
