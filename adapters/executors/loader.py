"""Build the one executor registry at start-up (design.md 11.1).

Sources, in order: the development fakes (when the settings allow them), the
Python entry points of the group ``execution_ledger.executors``, and the
executors file (``LEDGER_EXECUTORS_FILE``). Everything is collected and checked
first and registered only when all of it is sound, so a broken plugin, a
duplicate (capability, build) or a bad file stops start-up with one line naming
the culprit, and a half-registered set never exists.

A plugin is a factory ``factory(settings) -> iterable`` whose items are
executors or :class:`Registration` objects (an executor with its read-only
reconciler). See docs/executors.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from adapters.executors.content_schema import (
    ContentSchemaError,
    LoadedContentSchema,
    load_content_schema,
)
from adapters.executors.fake import EffectLedger, FileEffectLedger, effect_ledger, register_fakes
from adapters.executors.http_config import HttpConfigError, HttpExecutorConfig, check_entry
from adapters.executors.mcp_config import McpConfigError, McpServerConfig, read_mcp_entries
from adapters.executors.registry import DuplicateExecutor, StaticExecutorRegistry
from adapters.settings import Environment, Settings, SettingsError
from adapters.webhooks.config import WebhookConfigError, WebhookSubscription, check_webhooks
from domain.directory import DeliveryMode
from domain.ports import Clock, Executor, Reconciler
from domain.redaction import looks_secret
from domain.spec import DIGEST_PATTERN, NAME_PATTERN

ENTRY_POINT_GROUP = "execution_ledger.executors"
FILE_KINDS = frozenset({"http", "webhook", "mcp"})
MAX_FILE_BYTES = 1024 * 1024


class ExecutorConfigError(SettingsError):
    """The executors cannot be built; the message names the plugin, file entry or key."""


@dataclass(frozen=True)
class Registration:
    """What a plugin factory may return for one build: the executor and, for
    ``correlation_lookup``, its read-only reconciler."""

    executor: Executor
    reconciler: Reconciler | None = None


@dataclass
class LoadedExecutors:
    """The registry and what went into it."""

    registry: StaticExecutorRegistry
    effects: EffectLedger | FileEffectLedger | None = None
    http: list[HttpExecutorConfig] = field(default_factory=list)
    webhooks: list[WebhookSubscription] = field(default_factory=list)
    mcp: list[McpServerConfig] = field(default_factory=list)


@dataclass(frozen=True)
class _Pending:
    executor: Any
    reconciler: Any
    kind: str
    source: str
    content_schema: LoadedContentSchema | None = None


def load_executors(
    settings: Settings,
    *,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    plugins: Iterable[EntryPoint] | None = None,
) -> LoadedExecutors:
    """Build the registry from every source; raise ``ExecutorConfigError`` on any problem."""
    from adapters.system import SystemClock

    clock = clock or SystemClock()
    environ = os.environ if environ is None else environ
    pending: list[_Pending] = []
    for point in plugins if plugins is not None else entry_points(group=ENTRY_POINT_GROUP):
        pending.extend(_from_plugin(point, settings))
    configs = read_executors_file(settings, environ)
    webhooks = read_webhooks(settings, environ)
    if configs:
        from adapters.executors.http import build_http

        for executor, reconciler in build_http(configs, clock):
            source = f"LEDGER_EXECUTORS_FILE {Path(str(settings.executors_file)).name}: " + (
                executor.config.label
            )
            pending.append(
                _Pending(executor, reconciler, "http", source, executor.config.content_schema)
            )
    servers = read_mcp_servers(settings, environ)
    if servers:
        from adapters.executors.mcp import build_mcp

        for gated in build_mcp(servers, clock)[0]:
            source = f"LEDGER_EXECUTORS_FILE {Path(str(settings.executors_file)).name}: " + (
                f"{gated.gated.server.label} tool {gated.gated.tool.name}"
            )
            try:
                schema = load_content_schema(gated.content_schema, f"{source}: input schema")
            except ContentSchemaError as exc:
                raise ExecutorConfigError(str(exc)) from None
            pending.append(_Pending(gated, None, "mcp", source, schema))

    registry = StaticExecutorRegistry()
    effects = (
        register_fakes(
            registry,
            effect_ledger(fake_effects_path(settings)),
            clock,
            settle_seconds=settings.fake_settle_seconds,
        )
        if settings.fake_executors_enabled
        else None
    )
    for item in pending:
        try:
            registry.register(
                item.executor,
                item.reconciler,
                kind=item.kind,
                draining=getattr(item.executor, "draining", False) is True,
                content_schema=item.content_schema,
            )
        except DuplicateExecutor:
            for built in pending:
                close = getattr(built.executor, "close", None)
                if callable(close):
                    close()
            raise ExecutorConfigError(
                f"{item.source} registers {item.executor.capability} "
                f"{item.executor.build_digest}, which is already registered"
            ) from None
    return LoadedExecutors(registry, effects, configs, webhooks, servers)


def fake_effects_path(settings: Settings) -> str | None:
    """Where the development fakes keep their effects: the configured file; else,
    for a ledger in an SQLite file, a file beside it; else (``:memory:``,
    DynamoDB) in memory.

    In memory, the fake provider remembers every effect by key for as long as
    the process lives (that is how it replays a provider-idempotent retry), so
    a long-running ``ledger serve`` would grow with every execution; on disk it
    stays flat, and a restarted server still knows what it applied.
    """
    if settings.fake_effects_file:
        return settings.fake_effects_file
    if settings.store == "sqlite" and settings.sqlite_path != ":memory:":
        path = Path(settings.sqlite_path)
        return str(path.with_name(path.name + ".fake-effects"))
    return None


def read_webhooks(settings: Settings, environ: Mapping[str, str]) -> list[WebhookSubscription]:
    """The ``[[webhook]]`` subscriptions of ``LEDGER_EXECUTORS_FILE`` (design.md 5.10)."""
    if not settings.executors_file:
        return []
    name, document = _read_document(settings.executors_file)
    try:
        return check_webhooks(
            document.get("webhook", []),
            name,
            environ,
            production=settings.env is Environment.PRODUCTION,
        )
    except WebhookConfigError as exc:
        raise ExecutorConfigError(str(exc)) from None


def read_mcp_servers(settings: Settings, environ: Mapping[str, str]) -> list[McpServerConfig]:
    """The ``[[mcp]]`` downstream servers of ``LEDGER_EXECUTORS_FILE`` (docs/mcp.md)."""
    if not settings.executors_file:
        return []
    name, document = _read_document(settings.executors_file)
    try:
        return read_mcp_entries(
            document.get("mcp", []),
            name,
            environ,
            production=settings.env is Environment.PRODUCTION,
        )
    except McpConfigError as exc:
        raise ExecutorConfigError(str(exc)) from None


def _read_document(file: str) -> tuple[str, dict[str, Any]]:
    path = Path(file)
    name = f"LEDGER_EXECUTORS_FILE {path.name}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ExecutorConfigError(f"{name}: cannot read ({exc.strerror or 'error'})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ExecutorConfigError(f"{name}: larger than {MAX_FILE_BYTES} bytes")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ExecutorConfigError(f"{name}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExecutorConfigError(f"{name}: not valid TOML ({exc})") from None
    except RecursionError:  # the parser recurses once per nested array or table
        raise ExecutorConfigError(_too_deep(name)) from None
    check_depth(document, name)
    return name, document


MAX_FILE_DEPTH = 32


def _too_deep(name: str) -> str:
    return f"{name}: nested more than {MAX_FILE_DEPTH} levels deep (arrays and tables)"


def check_depth(document: dict[str, Any], name: str) -> None:
    """Refuse a document nested deeper than ``MAX_FILE_DEPTH`` (walked without
    recursion), so no later check can exhaust the stack on it."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_FILE_DEPTH:
            raise ExecutorConfigError(_too_deep(name))
        children = value.values() if isinstance(value, dict) else value
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def read_executors_file(settings: Settings, environ: Mapping[str, str]) -> list[HttpExecutorConfig]:
    """Parse and check ``LEDGER_EXECUTORS_FILE`` (empty list when unset)."""
    if not settings.executors_file:
        return []
    name, document = _read_document(settings.executors_file)
    unknown = sorted(set(document) - FILE_KINDS)
    if unknown:
        raise ExecutorConfigError(
            f"{name}: unknown key {unknown[0]!r} (expected [[http]], [[mcp]] or [[webhook]] tables)"
        )
    entries = document.get("http", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ExecutorConfigError(f"{name}: 'http' must be an array of tables ([[http]])")
    production = settings.env is Environment.PRODUCTION
    configs: list[HttpExecutorConfig] = []
    current: dict[str, int] = {}
    for position, raw in enumerate(entries, start=1):
        try:
            config = check_entry(
                raw,
                position,
                environ,
                production=production,
                base_dir=Path(settings.executors_file).parent,
            )
        except HttpConfigError as exc:
            raise ExecutorConfigError(f"{name}: {exc}") from None
        capability = config.entry.capability
        if not config.entry.draining:
            if capability in current:
                # new proposals must be told one build per capability
                raise ExecutorConfigError(
                    f"{name}: {config.label}: a second current entry of {capability} "
                    f"(#{current[capability]} is one); mark the older entry draining = true"
                )
            current[capability] = position
        configs.append(config)
    return configs


def _from_plugin(point: EntryPoint, settings: Settings) -> list[_Pending]:
    source = f"executor plugin {point.name!r} ({point.value})"
    try:
        factory = point.load()
        produced = list(factory(settings))
    except ExecutorConfigError:
        raise
    except Exception as exc:
        raise ExecutorConfigError(f"{source} failed: {_safe_error(exc)}") from None
    pending: list[_Pending] = []
    for item in produced:
        registration = item if isinstance(item, Registration) else Registration(item)
        schema = _check_plugin_executor(registration, source)
        pending.append(
            _Pending(registration.executor, registration.reconciler, point.name, source, schema)
        )
    return pending


def _check_plugin_executor(registration: Registration, source: str) -> LoadedContentSchema | None:
    """Check one plugin executor against the port; returns its checked content schema."""
    executor = registration.executor
    capability = getattr(executor, "capability", None)
    digest = getattr(executor, "build_digest", None)
    mode = getattr(executor, "delivery_mode", None)
    if not isinstance(capability, str) or not re.fullmatch(NAME_PATTERN[1:-1], capability):
        raise ExecutorConfigError(f"{source}: an executor has no valid capability name")
    where = f"{source}: {capability}"
    if not isinstance(digest, str) or not re.fullmatch(DIGEST_PATTERN[1:-1], digest):
        raise ExecutorConfigError(f"{where}: build_digest must be sha256:<64 hex>")
    if not isinstance(mode, DeliveryMode):
        raise ExecutorConfigError(f"{where}: delivery_mode must be a DeliveryMode")
    if not callable(getattr(executor, "execute", None)):
        raise ExecutorConfigError(f"{where}: has no execute(request) method")
    reconciler = registration.reconciler
    if reconciler is not None and not callable(getattr(reconciler, "lookup", None)):
        raise ExecutorConfigError(f"{where}: the reconciler has no lookup(request) method")
    if mode is DeliveryMode.CORRELATION_LOOKUP and reconciler is None:
        raise ExecutorConfigError(f"{where}: correlation_lookup needs a read-only reconciler")
    declared = getattr(executor, "content_schema", None)
    if declared is None:
        return None
    try:
        return load_content_schema(declared, f"{where}: content_schema")
    except ContentSchemaError as exc:
        raise ExecutorConfigError(str(exc)) from None


def _safe_error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    if not text or looks_secret(text):
        return type(exc).__name__
    return f"{type(exc).__name__}: {text}"
