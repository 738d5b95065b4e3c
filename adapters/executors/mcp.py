"""The built-in ``mcp`` executor: one gated tool of a downstream MCP server
(docs/mcp.md).

At start-up the server's tools are listed once; each gated tool becomes one
executor build whose digest binds the server's configured identity, its
advertised name, the tool's name and its input schema (and the entry's
settings), so a changed tool is a new build that the directory must allow.
A server that cannot be reached at start-up registers none of its tools (a
warning names it): their attempts wait for a worker that has the build.

Each call opens a connection, lists the tools again and calls the tool only
when it is still exactly the one the build was made from, with the attempt's
idempotency key in the request's ``_meta``; no retries here (the delivery
mode decides). Classification: a structured result is ``succeeded`` with a
receipt cut to the configured JSON pointers; anything that fails before the
``tools/call`` request is sent (the server unreachable, the tool gone or
changed) proves that nothing was written (``ExecutorNoEffect``), as does a
JSON-RPC refusal of the request (invalid params, unknown method); a tool
error (``isError``), a timeout or a broken connection after the request was
sent is ambiguous and follows the delivery mode.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

from adapters.executors.digest import build_digest, code_identity
from adapters.executors.http import cut_receipt
from adapters.executors.mcp_client import (
    Offer,
    fetch_offer,
    first_error,
    read_offer,
    run_blocking,
    session,
)
from adapters.executors.mcp_config import KIND, McpServerConfig, McpToolEntry
from domain.errors import (
    ExecutorNoEffect,
    ExecutorOutcomeUncertain,
)
from domain.ports import Clock, ExecutionReceipt, ExecutionRequest

log = logging.getLogger(__name__)
MIN_SECONDS = 0.05
# JSON-RPC refusals of the request itself: the tool never ran.
REFUSALS = {-32602: "invalid_params", -32601: "method_not_found", -32600: "invalid_request"}


def mcp_code_identity() -> str:
    """The code identity of the mcp executor: its own source files."""
    return code_identity(
        "adapters.executors.mcp",
        "adapters.executors.mcp_config",
        "adapters.executors.mcp_client",
    )


@dataclass(frozen=True)
class GatedTool:
    """A gated tool as discovered: its server, its entry and what it was built from."""

    server: McpServerConfig
    tool: McpToolEntry
    fingerprint: str
    input_schema: dict[str, Any]
    description: str | None


class McpExecutor:
    """Calls one gated tool of one downstream server; see the module docstring."""

    kind = KIND

    def __init__(self, gated: GatedTool, *, clock: Clock, code: str | None = None) -> None:
        tool = gated.tool
        self.gated = gated
        self.capability = tool.capability
        self.delivery_mode = tool.delivery_mode
        self.settle_seconds = tool.settle_seconds
        self.draining = tool.draining
        self.clock = clock
        self.content_schema = gated.input_schema
        self.build_digest = build_digest(code or mcp_code_identity(), self.digest_config())

    def __repr__(self) -> str:
        return f"McpExecutor({self.capability} {self.build_digest})"

    def digest_config(self) -> dict[str, Any]:
        """What the build is made of: the server's identity, the tool and its
        fingerprint (advertised server name, tool name, input schema), the settings."""
        server, tool = self.gated.server.entry, self.gated.tool
        return {
            "kind": KIND,
            "server": server.server,
            "identity": self.gated.server.identity(),
            "timeout_seconds": server.timeout_seconds,
            "idempotency_meta_key": server.idempotency_meta_key,
            "tool": tool.name,
            "tool_fingerprint": self.gated.fingerprint,
            "delivery_mode": tool.delivery_mode.value,
            "receipt": list(tool.receipt),
            "settle_seconds": tool.settle_seconds,
        }

    def _seconds_left(self, request: ExecutionRequest) -> float:
        until_deadline = (request.deadline - self.clock.now()).total_seconds()
        return min(self.gated.server.entry.timeout_seconds, until_deadline)

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        seconds = self._seconds_left(request)
        if seconds < MIN_SECONDS:
            # Nothing is sent, but an earlier generation may have been: ambiguous.
            raise ExecutorOutcomeUncertain()
        sent: list[bool] = []
        end = time.monotonic() + seconds
        try:
            result = run_blocking(lambda: self._call(request, end, sent))
        except (ExecutorNoEffect, ExecutorOutcomeUncertain):
            raise
        except BaseException as error:
            raise self._judge(error, sent) from None
        return self._receipt(result)

    async def _call(self, request: ExecutionRequest, end: float, sent: list[bool]) -> Any:
        server, tool = self.gated.server, self.gated.tool
        arguments = json.loads(json.dumps(dict(request.spec.content)))
        meta = {server.entry.idempotency_meta_key: request.idempotency_key}
        answer: dict[str, Any] = {}
        with anyio.fail_after(max(0.0, end - time.monotonic())):
            async with session(server, server.entry.timeout_seconds) as opened:
                offer = await read_offer(opened)
                self._check_unchanged(offer)
                sent.append(True)  # from here on, the request may have reached the tool
                try:
                    answer["result"] = await opened.call_tool(tool.name, arguments, meta=meta)
                except Exception as exc:  # judged below, outside the task groups
                    answer["error"] = exc
        if "error" in answer:
            raise answer["error"]
        return answer["result"]

    def _check_unchanged(self, offer: Offer) -> None:
        found = offer.fingerprint(self.gated.tool.name)
        if found is None:
            raise ExecutorNoEffect(reason_code="downstream_tool_missing")
        if found != self.gated.fingerprint:
            raise ExecutorNoEffect(reason_code="downstream_tool_changed")

    def _judge(self, error: BaseException, sent: list[bool]) -> Exception:
        from mcp import MCPError

        for kind in (ExecutorNoEffect, ExecutorOutcomeUncertain):
            found = first_error(error, kind)
            if isinstance(found, kind):
                return found
        if not sent:
            return ExecutorNoEffect(reason_code="downstream_unavailable")
        refused = first_error(error, MCPError)
        if isinstance(refused, MCPError) and refused.code in REFUSALS:
            return ExecutorNoEffect(reason_code=f"downstream_{REFUSALS[refused.code]}")
        return ExecutorOutcomeUncertain()

    def _receipt(self, result: Any) -> ExecutionReceipt:
        if result.is_error:
            # The tool ran and said it failed: what it did before failing is unknown.
            raise ExecutorOutcomeUncertain()
        keys = self.gated.server.receipt_keys(self.gated.tool)
        if not keys:
            return ExecutionReceipt({})
        structured = result.structured_content
        if structured is None:
            texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
            body = texts[0].encode() if len(texts) == 1 else None
        else:
            body = json.dumps(structured).encode()
        return ExecutionReceipt(cut_receipt(body, keys))


def gated_tools(config: McpServerConfig, offer: Offer) -> tuple[list[GatedTool], list[str]]:
    """The gated tools the server offers, and one warning per tool it does not."""
    found: list[GatedTool] = []
    missing: list[str] = []
    for tool in config.entry.tool:
        fingerprint = offer.fingerprint(tool.name)
        info = offer.tools.get(tool.name)
        if fingerprint is None or info is None:
            missing.append(f"{config.label}: the server offers no tool {tool.name!r}")
            continue
        found.append(GatedTool(config, tool, fingerprint, info.input_schema, info.description))
    return found, missing


def discover(configs: list[McpServerConfig]) -> tuple[dict[str, Offer], list[str]]:
    """Each reachable server's offer by server name, and a warning per server that
    could not be reached (none of its tools is registered)."""
    offers: dict[str, Offer] = {}
    warnings: list[str] = []
    for config in configs:
        try:
            offers[config.entry.server] = run_blocking(partial(fetch_offer, config))
        except BaseException as error:
            if not isinstance(error, Exception):
                raise
            warnings.append(
                f"{config.label}: the server could not be reached ({type(error).__name__}); "
                "none of its tools is registered"
            )
    return offers, warnings


def build_mcp(
    configs: list[McpServerConfig], clock: Clock, offers: Mapping[str, Offer] | None = None
) -> tuple[list[McpExecutor], list[str]]:
    """One executor per gated tool the servers offer now (``offers``: already
    discovered), and the warnings for the rest, each logged."""
    if offers is None:
        offers, warnings = discover(configs)
    else:
        warnings = []
    code = mcp_code_identity()
    executors: list[McpExecutor] = []
    for config in configs:
        offer = offers.get(config.entry.server)
        if offer is None:
            continue
        found, missing = gated_tools(config, offer)
        warnings.extend(missing)
        executors.extend(McpExecutor(gated, clock=clock, code=code) for gated in found)
    for warning in warnings:
        log.warning("mcp executor: %s", warning)
    return executors, warnings
