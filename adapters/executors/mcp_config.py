"""The ``[[mcp]]`` entries of the executors file: a downstream MCP server and the
tools of it that are gated (docs/mcp.md).

One ``[[mcp]]`` table names one downstream server, reached over streamable
HTTP (``url``, optional ``headers``) or stdio (``command``, ``args``, ``cwd``,
``env``); each ``[[mcp.tool]]`` under it gates one tool of that server as a
capability with its own delivery mode. The other tools of the server are
``ungated``: hidden from agents (the default) or passed through by the gateway
as they are. Everything that can be wrong with an entry is found here, at
start-up, in one line naming the entry and the key; secret values come only
from ``env:NAME`` references and never appear in a message or a build digest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from adapters.executors.http_config import (
    ENV_REFERENCE,
    HEADER_NAME,
    HttpConfigError,
    entry_error,
    parse_template,
    receipt_key,
)
from domain.directory import DeliveryMode
from domain.redaction import looks_secret, secret_shaped_key
from domain.spec import NAME_PATTERN

KIND = "mcp"
DEFAULT_META_KEY = "execution-ledger/idempotency-key"
# The _meta key names of the MCP specification: an optional dotted prefix and a slash,
# then a name that starts and ends alphanumeric.
META_KEY = re.compile(
    r"^(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$"
)
TOOL_NAME = r"^[A-Za-z0-9_.\-]{1,128}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
RESERVED_TOOLS = frozenset({"list_capabilities", "propose_action", "get_action_status"})
GATED_MODES = (DeliveryMode.PROVIDER_IDEMPOTENCY, DeliveryMode.OPERATOR_RECONCILIATION_ONLY)


class McpConfigError(ValueError):
    """One problem with one ``[[mcp]]`` entry; the message names the key, never a value."""


class McpToolEntry(BaseModel):
    """One ``[[mcp.tool]]`` table: a gated tool of the server."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: Annotated[str, Field(pattern=TOOL_NAME)]
    capability: Annotated[str, Field(pattern=NAME_PATTERN)]
    delivery_mode: Annotated[DeliveryMode, Field(strict=False)]
    # What an approval of a call means (the proposal spec the gateway writes);
    # not part of the build digest: they are the proposer's, not the executor's.
    permission: Annotated[str, Field(pattern=NAME_PATTERN)]
    effect: Annotated[str, Field(pattern=NAME_PATTERN)] = "call"
    destination: Annotated[str | None, Field(min_length=1, max_length=256)] = None
    receipt: Annotated[list[str], Field(max_length=16)] = Field(default_factory=list)
    settle_seconds: Annotated[float, Field(ge=0, le=3600, strict=False)] = 0.0
    draining: bool = False


class McpServerEntry(BaseModel):
    """One ``[[mcp]]`` table, exactly as written (unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    server: Annotated[str, Field(pattern=NAME_PATTERN)]
    url: Annotated[str | None, Field(min_length=1, max_length=2048)] = None
    headers: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    command: Annotated[str | None, Field(min_length=1, max_length=1024)] = None
    args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=64)] = Field(
        default_factory=list
    )
    cwd: Annotated[str | None, Field(min_length=1, max_length=1024)] = None
    env: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    timeout_seconds: Annotated[float, Field(gt=0, le=300, strict=False)] = 10.0
    idempotency_meta_key: str = DEFAULT_META_KEY
    ungated: Literal["hide", "pass"] = "hide"
    tool: Annotated[list[McpToolEntry], Field(min_length=1, max_length=64)]

    @field_validator("idempotency_meta_key")
    @classmethod
    def _meta_key(cls, value: str) -> str:
        if not META_KEY.match(value):
            raise ValueError("must be an MCP _meta key name (prefix/name)")
        return value


@dataclass(frozen=True)
class McpServerConfig:
    """A checked ``[[mcp]]`` entry with its secrets resolved (values kept out of repr)."""

    entry: McpServerEntry
    position: int
    header_values: tuple[tuple[str, str], ...]
    env_values: tuple[tuple[str, str], ...]

    def __repr__(self) -> str:
        return f"McpServerConfig({self.label})"

    @property
    def label(self) -> str:
        return f"[[mcp]] #{self.position} ({self.entry.server})"

    def identity(self) -> dict[str, Any]:
        """Where the server is, as configured: bound into every build digest of it
        (secrets as their ``env:NAME`` references)."""
        entry = self.entry
        if entry.url is not None:
            return {"url": entry.url, "headers": dict(entry.headers)}
        return {"command": entry.command, "args": list(entry.args), "cwd": entry.cwd,
                "env": dict(entry.env)}  # fmt: skip

    def receipt_keys(self, tool: McpToolEntry) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple(receipt_key(pointer) for pointer in tool.receipt)


def check_mcp_entry(
    raw: Any, position: int, environ: Mapping[str, str], *, production: bool
) -> McpServerConfig:
    """Validate one ``[[mcp]]`` table and resolve its ``env:`` references."""
    label = f"[[mcp]] #{position}"
    if isinstance(raw, Mapping) and isinstance(raw.get("server"), str):
        label += f" ({raw['server'][:64]})"
    try:
        entry = McpServerEntry.model_validate(raw)
    except ValidationError as exc:
        raise McpConfigError(f"{label}: {entry_error(exc)}") from None
    try:
        _check_transport(entry, production=production)
        seen: set[str] = set()
        for index, tool in enumerate(entry.tool):
            where = f"tool.{index}"
            if tool.name in seen:
                raise McpConfigError(f"{where}.name: the tool {tool.name!r} is gated twice")
            if tool.name in RESERVED_TOOLS:
                raise McpConfigError(f"{where}.name: {tool.name!r} is a tool of the gateway itself")
            seen.add(tool.name)
            if tool.delivery_mode not in GATED_MODES:
                raise McpConfigError(
                    f"{where}.delivery_mode: correlation_lookup needs a read-only lookup, which "
                    "an MCP tool does not have; use provider_idempotency (the server "
                    "deduplicates by the key in _meta) or operator_reconciliation_only"
                )
            keys: set[str] = set()
            for pointer in tool.receipt:
                try:
                    key, _ = receipt_key(pointer)
                except HttpConfigError as exc:
                    raise McpConfigError(f"{where}.receipt: {exc}") from None
                if key in keys:
                    raise McpConfigError(f"{where}.receipt: two pointers give the key {key!r}")
                keys.add(key)
        headers = _resolve(entry.headers, environ, "headers", header=True)
        env = _resolve(entry.env, environ, "env", header=False)
    except McpConfigError as exc:
        raise McpConfigError(f"{label}: {exc}") from None
    return McpServerConfig(entry, position, headers, env)


def _check_transport(entry: McpServerEntry, *, production: bool) -> None:
    if (entry.url is None) == (entry.command is None):
        raise McpConfigError("url or command: give exactly one (streamable HTTP or stdio)")
    if entry.url is not None:
        if entry.args or entry.cwd or entry.env:
            raise McpConfigError("args, cwd, env: only for a stdio server (command)")
        try:
            parse_template(entry.url, frozenset(), "url", production=production)
        except HttpConfigError as exc:
            raise McpConfigError(str(exc)) from None
    elif entry.headers:
        raise McpConfigError("headers: only for a streamable HTTP server (url)")


def _resolve(
    values: Mapping[str, str], environ: Mapping[str, str], what: str, *, header: bool
) -> tuple[tuple[str, str], ...]:
    """Each value as written, or its ``env:NAME`` variable's value; a secret-looking
    value written in the file is refused."""
    resolved: list[tuple[str, str]] = []
    for name, value in values.items():
        where = f"{what}.{name}"
        if not re.match(HEADER_NAME.pattern if header else ENV_NAME, name):
            raise McpConfigError(f"{where}: not a valid {'header' if header else 'variable'} name")
        reference = ENV_REFERENCE.match(value)
        if reference is None:
            if value.startswith("env:"):
                raise McpConfigError(f"{where}: 'env:' must be followed by a variable name")
            if secret_shaped_key(name) or looks_secret(value):
                raise McpConfigError(
                    f'{where}: secret values must come from the environment ("env:NAME"), '
                    "not the file"
                )
            secret = value
        else:
            variable = reference.group(1)
            secret = environ.get(variable, "")
            if not secret:
                raise McpConfigError(f"{where}: environment variable {variable} is not set")
        if header and any(ord(ch) < 32 or ord(ch) == 127 for ch in secret):
            raise McpConfigError(f"{where}: control characters are not allowed in a header")
        resolved.append((name, secret))
    return tuple(resolved)


def read_mcp_entries(
    entries: Any, name: str, environ: Mapping[str, str], *, production: bool
) -> list[McpServerConfig]:
    """Every ``[[mcp]]`` table of the executors file named ``name``, checked; one
    line naming the file, the entry and the key for the first problem."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise McpConfigError(f"{name}: 'mcp' must be an array of tables ([[mcp]])")
    configs: list[McpServerConfig] = []
    servers: dict[str, int] = {}
    current: dict[str, str] = {}
    for position, raw in enumerate(entries, start=1):
        try:
            config = check_mcp_entry(raw, position, environ, production=production)
        except McpConfigError as exc:
            raise McpConfigError(f"{name}: {exc}") from None
        server = config.entry.server
        if server in servers:
            raise McpConfigError(
                f"{name}: {config.label}: the server name is used by [[mcp]] #{servers[server]} too"
            )
        servers[server] = position
        for tool in config.entry.tool:
            if not tool.draining and tool.capability in current:
                raise McpConfigError(
                    f"{name}: {config.label}: capability {tool.capability} is already gated "
                    f"by {current[tool.capability]}; mark the older one draining = true"
                )
            if not tool.draining:
                current[tool.capability] = f"{config.label} tool {tool.name}"
        configs.append(config)
    return configs
