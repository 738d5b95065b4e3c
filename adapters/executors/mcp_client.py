"""Talking to a downstream MCP server with the SDK's own client session.

A connection per use: stdio spawns the server's process and ends it on the way
out, streamable HTTP opens a session and deletes it. What the server offers is
read with ``tools/list`` (every page), and each tool's definition is reduced
to its fingerprint: the server's advertised name, the tool's name and its
input schema, canonicalized, so that a change to any of them changes the
build digest of the tool (and a changed tool is never called on an old
build). Nothing read from the server is logged: its stderr goes nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from adapters.executors.mcp_config import McpServerConfig
from domain.canonical import canonical_json
from domain.spec import sha256_tag

T = TypeVar("T")
MAX_PAGES = 32
CLIENT_NAME = "execution-ledger"


@dataclass(frozen=True)
class ToolInfo:
    """One tool as the server advertises it."""

    name: str
    description: str | None
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Offer:
    """What a server offers: its advertised name and its tools by name."""

    server_name: str
    tools: dict[str, ToolInfo]

    def fingerprint(self, tool: str) -> str | None:
        """``sha256:`` over the server's name, the tool's name and its input schema
        (None: the server does not offer the tool)."""
        found = self.tools.get(tool)
        if found is None:
            return None
        return tool_fingerprint(self.server_name, found.name, found.input_schema)


def tool_fingerprint(server_name: str, tool: str, input_schema: dict[str, Any]) -> str:
    """The digest of what a gated call depends on: who serves it and what it takes."""
    try:
        schema = canonical_json(input_schema)
    except Exception:
        # A schema the canonical form refuses (an integer past 2^53): its JSON text.
        import json

        schema = json.dumps(input_schema, sort_keys=True, separators=(",", ":")).encode()
    return sha256_tag(
        canonical_json({"server": server_name, "tool": tool}) + b"\n" + schema,
    )


@contextlib.asynccontextmanager
async def session(config: McpServerConfig, timeout: float) -> AsyncIterator[Any]:
    """An initialized ``ClientSession`` with the server (``timeout``: per request)."""
    from mcp import ClientSession, Implementation

    entry = config.entry
    info = Implementation(name=CLIENT_NAME, version="1")
    if entry.url is not None:
        import httpx2

        for name in ("httpx2", "httpcore2"):  # request lines name the server: not logged
            logging.getLogger(name).setLevel(logging.WARNING)
        from mcp.client.streamable_http import streamable_http_client

        client = httpx2.AsyncClient(
            headers=dict(config.header_values),
            timeout=httpx2.Timeout(timeout),
            trust_env=False,
        )
        async with (
            client,
            streamable_http_client(entry.url, http_client=client) as (read, write),
            ClientSession(read, write, read_timeout_seconds=timeout, client_info=info) as opened,
        ):
            await opened.initialize()
            yield opened
        return
    from mcp import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=entry.command or "", args=list(entry.args), env=dict(config.env_values),
        cwd=entry.cwd,
    )  # fmt: skip
    with open(os.devnull, "w") as errlog:  # the server's stderr may hold anything: dropped
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=timeout, client_info=info) as opened,
        ):
            await opened.initialize()
            yield opened


async def read_offer(opened: Any) -> Offer:
    """Every tool the connected server lists (all pages, at most ``MAX_PAGES``)."""
    from mcp import types

    tools: dict[str, ToolInfo] = {}
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await opened.list_tools(params=params)
        for tool in page.tools:
            tools[tool.name] = ToolInfo(tool.name, tool.description, dict(tool.input_schema))
        cursor = page.next_cursor
        if not cursor:
            break
    info = opened.initialize_result.server_info if opened.initialize_result else None
    return Offer(info.name if info is not None else "", tools)


async def fetch_offer(config: McpServerConfig) -> Offer:
    """Connect, list, disconnect, within the entry's timeout."""
    seconds = config.entry.timeout_seconds
    with anyio.fail_after(seconds):
        async with session(config, seconds) as opened:
            return await read_offer(opened)


def run_blocking(call: Callable[[], Awaitable[T]]) -> T:
    """Run an async call to completion from synchronous code: on this thread when
    no event loop runs here, else on a thread of its own (a loop cannot be nested)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(call)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = anyio.run(call)
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="mcp-client", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def first_error(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``error`` itself, or the first exception of type ``kind`` inside an exception
    group (task groups wrap what their tasks raise)."""
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = first_error(inner, kind)
            if found is not None:
                return found
    return None
