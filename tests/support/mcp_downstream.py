"""A downstream MCP server for the gateway's tests and the README: a small task
service that counts every ``tools/call`` per idempotency key and deduplicates by it.

    python -m tests.support.mcp_downstream --state var/tasks.db --transport stdio
    python -m tests.support.mcp_downstream --state var/tasks.db --transport http --port 8765

Its tools: ``create_task`` (title, optional priority) and ``send_message`` (to,
text) have an effect; ``list_tasks`` only reads. A call carrying the ledger's
idempotency key in its request ``_meta`` (``execution-ledger/idempotency-key``)
is applied once per key: a repeat answers the first result and applies nothing.
Every call is counted in the state file (SQLite, so a stdio server started per
call and the test that reads the counts share it): ``requests`` per key and
``effects`` per key. ``--variant v2`` changes ``create_task``'s input schema (a
required ``due`` field), as an upgraded server would. ``--fail-first N`` makes
the first N effect calls of a key apply the effect and then fail before
answering (a lost answer). ``TASKS_INTERNAL_NOTE`` set: each effect's answer
also carries it, outside the receipt's pointers. Nothing here is part of the ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio

IDEMPOTENCY_META_KEY = "execution-ledger/idempotency-key"
EFFECT_TOOLS = ("create_task", "send_message")
NOTE_ENV = "TASKS_INTERNAL_NOTE"  # set: every effect's answer carries it (a canary)


def tool_schemas(variant: str = "v1") -> dict[str, dict[str, Any]]:
    """Each tool's input schema as this server advertises it."""
    task: dict[str, Any] = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 200},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
        },
        "required": ["title"],
        "additionalProperties": False,
    }
    if variant == "v2":
        task["properties"]["due"] = {"type": "string"}
        task["required"] = ["title", "due"]
    return {
        "create_task": task,
        "send_message": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
            "required": ["to", "text"],
            "additionalProperties": False,
        },
        "list_tasks": {"type": "object", "properties": {}, "additionalProperties": False},
    }


class State:
    """The counts and the effects, in one SQLite file shared by every process."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with closing(self._open()) as db, db:
            db.executescript(
                """
                CREATE TABLE IF NOT EXISTS requests (key TEXT, tool TEXT);
                CREATE TABLE IF NOT EXISTS effects (
                    key TEXT UNIQUE, tool TEXT, result TEXT, failed INTEGER DEFAULT 0);
                """
            )

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def call(
        self, key: str | None, tool: str, arguments: Mapping[str, Any], fail_first: int
    ) -> Any:
        """Count the request, apply the effect once per key; raise after applying
        while ``fail_first`` is not used up (the answer is lost)."""
        with closing(self._open()) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO requests VALUES (?, ?)", (key, tool))
            row = None
            if key is not None:
                row = db.execute(
                    "SELECT result, failed FROM effects WHERE key = ?", (key,)
                ).fetchone()
            if row is not None:
                result, failed = json.loads(row[0]), row[1]
            else:
                count = db.execute("SELECT COUNT(*) FROM effects").fetchone()[0] + 1
                prefix = "task" if tool == "create_task" else "msg"
                status = "created" if tool == "create_task" else "sent"
                result, failed = {"id": f"{prefix}_{count}", "status": status}, 0
                db.execute(
                    "INSERT INTO effects VALUES (?, ?, ?, 0)",
                    (key if key is not None else f"no-key-{count}", tool, json.dumps(result)),
                )
            lose = failed < fail_first
            if lose:
                db.execute("UPDATE effects SET failed = failed + 1 WHERE key = ?", (key,))
            db.execute("COMMIT")
        if lose:
            raise RuntimeError("the answer was lost")
        return result

    def requests(self) -> dict[str, int]:
        """Requests per idempotency key (calls without a key under ``None``)."""
        with closing(self._open()) as db:
            rows = db.execute("SELECT key, COUNT(*) FROM requests GROUP BY key").fetchall()
        return {str(key): count for key, count in rows}

    def effects(self) -> dict[str, int]:
        """Effects applied per idempotency key (at most 1 each, by construction)."""
        with closing(self._open()) as db:
            rows = db.execute("SELECT key, COUNT(*) FROM effects GROUP BY key").fetchall()
        return {str(key): count for key, count in rows}

    def tasks(self) -> list[dict[str, Any]]:
        with closing(self._open()) as db:
            rows = db.execute("SELECT result FROM effects WHERE tool = 'create_task'").fetchall()
        return [json.loads(row[0]) for row in rows]


def build_server(state: State, *, variant: str = "v1", fail_first: int = 0) -> Any:
    """The lowlevel MCP server over ``state``."""
    from mcp import types
    from mcp.server import Server, ServerRequestContext

    schemas = tool_schemas(variant)

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, description=f"{name} (tasks service)", input_schema=schema)
                for name, schema in schemas.items()
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name not in schemas:
            from mcp import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name}")
        if params.name == "list_tasks":
            tasks = await anyio.to_thread.run_sync(state.tasks)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(tasks))],
                structured_content={"tasks": tasks},
            )
        key = (ctx.meta or {}).get(IDEMPOTENCY_META_KEY)
        key = key if isinstance(key, str) else None
        result = await anyio.to_thread.run_sync(state.call, key, params.name, arguments, fail_first)
        note = os.environ.get(NOTE_ENV)
        if note:  # what a real service adds to its answer beyond the receipt's pointers
            result = {**result, "internal_note": note}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result))],
            structured_content=result,
        )

    return Server(
        "tasks-service", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True, help="the SQLite file of counts and effects")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--variant", choices=["v1", "v2"], default="v1")
    parser.add_argument("--fail-first", type=int, default=0)
    args = parser.parse_args(argv)
    server = build_server(State(args.state), variant=args.variant, fail_first=args.fail_first)
    if args.transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
        return
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    print(f"tasks service on http://127.0.0.1:{args.port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
