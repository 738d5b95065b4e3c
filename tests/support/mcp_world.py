"""``ledger mcp`` as a user runs it: the files, the downstream server, the
directory, and the SDK's own client session over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.support.http_server import free_port, ledger_command
from tests.support.mcp_downstream import State
from tests.support.ministack import REPO_ROOT

SECRET_ENV = "PRESENTER_SECRET"
PROPOSER = "assistant-agent"
ALICE = {
    "actor_id": "alice",
    "identity_binding_id": "ib-alice",
    "channel_binding_id": "cb-kitchen",
    "conversation_key": "conv-42",
}


def executors_toml(
    transport: str, state: Path, *, url: str | None = None, modes: dict[str, str] | None = None
) -> str:
    """Two gated tools of the tasks service (create_task, send_message), list_tasks
    passed through."""
    modes = {
        "create_task": "provider_idempotency",
        "send_message": "operator_reconciliation_only",
    } | (modes or {})
    where = (
        f'url = "{url}"'
        if transport == "http"
        else (
            f'command = "{sys.executable}"\n'
            f'args = ["-m", "tests.support.mcp_downstream", "--state", "{state}"]\n'
            f'cwd = "{REPO_ROOT}"\nenv = {{ PYTHONPATH = "{REPO_ROOT}" }}'
        )
    )
    return f"""
[[mcp]]
server = "tasks"
{where}
timeout_seconds = 20
ungated = "pass"

[[mcp.tool]]
name = "create_task"
capability = "tasks.create"
delivery_mode = "{modes["create_task"]}"
permission = "tasks.write"
effect = "create"
destination = "tasks"
receipt = ["/id", "/status"]

[[mcp.tool]]
name = "send_message"
capability = "messages.send"
delivery_mode = "{modes["send_message"]}"
permission = "social.post"
effect = "send"
receipt = ["/id"]
"""


def mcp_toml(presenter_url: str) -> str:
    return f"""
proposer = "{PROPOSER}"

[presenter]
url = "{presenter_url}"
secret = "env:{SECRET_ENV}"

[[actor]]
id = "alice"
identity_binding_id = "ib-alice"
channel_binding_id = "cb-kitchen"
conversation_key = "conv-42"

[[capability]]
capability = "fake.provider_idempotency"
permission = "tasks.write"
effect = "create"
destination = "tasks"
description = "A development fake that creates a task."
"""


@dataclass
class McpFiles:
    """Everything one ``ledger mcp`` reads, in one directory."""

    root: Path
    store_env: dict[str, str]
    secret: str = field(default_factory=lambda: secrets.token_hex(16))
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def executors(self) -> Path:
        return self.root / "executors.toml"

    @property
    def config(self) -> Path:
        return self.root / "mcp.toml"

    @property
    def downstream(self) -> State:
        return State(self.root / "tasks.db")

    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
        return {
            **clean,
            **self.store_env,
            "LEDGER_EXECUTORS_FILE": str(self.executors),
            "LEDGER_RECOVERY_INTERVAL_SECONDS": "1",
            SECRET_ENV: self.secret,
            "PYTHONPATH": str(REPO_ROOT),
            **self.extra_env,
        }

    def settings(self) -> dict[str, Any]:
        """``open_ledger`` overrides for the same store and executors file."""
        values = {
            k.removeprefix("LEDGER_").lower(): v
            for k, v in self.store_env.items()
            if k.startswith("LEDGER_")
        }
        return {**values, "executors_file": str(self.executors)}


def write_files(
    root: Path,
    store_env: dict[str, str],
    presenter_url: str,
    *,
    transport: str = "http",
    url: str | None = None,
) -> McpFiles:
    files = McpFiles(root, store_env)
    files.downstream  # creates the state file  # noqa: B018
    files.executors.write_text(executors_toml(transport, root / "tasks.db", url=url))
    files.config.write_text(mcp_toml(presenter_url))
    return files


def allow_everything(ledger: Any) -> None:
    """The directory: alice, her chat bindings and grants, every build hosted."""
    ledger.put_actor("alice", enabled=True)
    ledger.put_identity_binding(
        "ib-alice", actor_id="alice", channel="chat", external_id="alice@chat"
    )
    ledger.put_channel_binding("cb-kitchen", conversation_key="conv-42", channel="chat")
    ledger.put_grant("alice", "tasks.write")
    ledger.put_grant("alice", "social.post")
    for entry in ledger.executors():
        ledger.put_executor_build(
            entry.capability, entry.build_digest, delivery_mode=entry.delivery_mode
        )


class Downstream:
    """The tasks service over streamable HTTP, as a process on a free port."""

    def __init__(
        self,
        state: Path,
        *,
        variant: str = "v1",
        fail_first: int = 0,
        port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        command = [sys.executable, "-m", "tests.support.mcp_downstream", "--state", str(state)]
        command += ["--transport", "http", "--port", str(self.port), "--variant", variant]
        command += ["--fail-first", str(fail_first)]
        self.process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def wait_for_port(port: int, process: subprocess.Popen[Any], timeout: float = 30) -> None:
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the process on port {port} exited early")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


class Captured:
    """Every message the client received from the server, as JSON text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, value: Any) -> Any:
        dump = getattr(value, "model_dump_json", None)
        self.texts.append(dump(by_alias=True) if dump is not None else json.dumps(value))
        return value


@contextlib.asynccontextmanager
async def stdio_session(files: McpFiles, *extra: str) -> AsyncIterator[Any]:
    """The SDK's client session with ``ledger mcp`` started over stdio."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command = ledger_command()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "mcp", "--config", str(files.config), *extra],
        env=files.env(),
        cwd=str(files.root),
    )
    with open(files.root / "mcp-stderr.log", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as session,
        ):
            await session.initialize()
            yield session


class Recording:
    """A client's read stream that keeps, as JSON text, every message the server
    sent (the SDK's ``ReadStream`` protocol, delegated)."""

    def __init__(self, inner: Any, texts: list[str]) -> None:
        self.inner = inner
        self.texts = texts

    def _keep(self, item: Any) -> Any:
        message = getattr(item, "message", None)
        dump = getattr(message, "model_dump_json", None)
        self.texts.append(dump(by_alias=True) if dump is not None else repr(item))
        return item

    async def receive(self) -> Any:
        return self._keep(await self.inner.receive())

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> Recording:
        return self

    async def __anext__(self) -> Any:
        return self._keep(await self.inner.__anext__())

    async def __aenter__(self) -> Recording:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # last_context and the like
        return getattr(self.inner, name)


@contextlib.asynccontextmanager
async def http_session(
    url: str, token: str | None, record: list[str] | None = None
) -> AsyncIterator[Any]:
    """The SDK's client session with ``ledger mcp --transport http`` (``record``:
    receives every server message as JSON text)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(
            read if record is None else Recording(read, record), write, read_timeout_seconds=60
        ) as session,
    ):
        await session.initialize()
        yield session


@contextlib.contextmanager
def serving_http(files: McpFiles, *extra: str) -> Iterator[tuple[str, subprocess.Popen[Any]]]:
    """``ledger mcp --transport http`` as a process; its /mcp URL."""
    port = free_port()
    log = files.root / "mcp-http.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [*ledger_command(), "mcp", "--transport", "http", "--port", str(port),
             "--config", str(files.config), *extra],
            cwd=files.root, env=files.env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for_port(port, process)
            yield f"http://127.0.0.1:{port}/mcp", process
        finally:
            process.terminate()
            process.wait(30)


def structured(result: Any) -> dict[str, Any]:
    """A tool result's JSON answer (a refusal included)."""
    data = result.structured_content
    assert isinstance(data, dict), result
    return data


def run(coroutine: Any) -> Any:
    """Run an async test body."""
    return anyio.run(lambda: coroutine)


def http_status(url: str, token: str | None) -> int:
    """The HTTP status of a bare initialize request (what a client without a valid token meets)."""
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}}  # fmt: skip
    return httpx.post(url, json=body, headers=headers, timeout=10).status_code
