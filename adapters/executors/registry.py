"""Executors and reconcilers keyed by (capability, exact build digest)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.executors.content_schema import LoadedContentSchema, load_content_schema
from domain.directory import DeliveryMode
from domain.ports import Executor, Reconciler
from domain.spec import NO_CONTENT_SCHEMA, content_schema_digest

NO_SCHEMA_DIGEST = content_schema_digest(NO_CONTENT_SCHEMA)
"""The ``schema_digest`` of a build that declares no content schema (``{}``)."""


class DuplicateExecutor(ValueError):
    """A (capability, build digest) pair is registered twice."""


@dataclass(frozen=True)
class RegistryEntry:
    """One registered executor build; ``kind`` says where it came from."""

    capability: str
    build_digest: str
    delivery_mode: DeliveryMode
    kind: str = "fake"
    has_reconciler: bool = False
    draining: bool = False
    content_schema: Mapping[str, Any] | None = None
    """The JSON Schema the build declares for ``content``; None: any object."""
    schema_digest: str = NO_SCHEMA_DIGEST
    """What a spec for this build names as ``schema_digest`` (design.md 2.1)."""

    @property
    def state(self) -> str:
        """``current`` (new proposals may name it) or ``draining`` (only the attempts
        and open presentations already bound to it still run on it)."""
        return "draining" if self.draining else "current"


class StaticExecutorRegistry:
    """Implements ``domain.ports.ExecutorRegistry`` with plain dicts."""

    def __init__(self) -> None:
        self._executors: dict[tuple[str, str], Executor] = {}
        self._reconcilers: dict[tuple[str, str], Reconciler] = {}
        self._kinds: dict[tuple[str, str], str] = {}
        self._draining: set[tuple[str, str]] = set()
        self._schemas: dict[tuple[str, str], LoadedContentSchema] = {}

    def register(
        self,
        executor: Executor,
        reconciler: Reconciler | None = None,
        *,
        kind: str = "fake",
        draining: bool = False,
        content_schema: LoadedContentSchema | None = None,
    ) -> None:
        """Host one build. ``draining``: hosted for what is already bound to it,
        refused to new proposals (a rollover keeps the previous build beside the new).
        ``content_schema``: the build's checked schema; without it, the executor's
        ``content_schema`` attribute when it has one (``ContentSchemaError`` if unusable)."""
        key = (executor.capability, executor.build_digest)
        if key in self._executors:
            raise DuplicateExecutor(f"executor already registered: {key[0]} {key[1]}")
        if content_schema is None:
            declared = getattr(executor, "content_schema", None)
            if declared is not None:
                content_schema = load_content_schema(declared, f"{key[0]} content_schema")
        if content_schema is not None:
            self._schemas[key] = content_schema
        self._executors[key] = executor
        self._kinds[key] = kind
        if draining:
            self._draining.add(key)
        if reconciler is not None:
            self._reconcilers[key] = reconciler

    def replace(self, executor: Executor) -> Executor:
        """Swap the executor registered for the same (capability, build); returns the old one."""
        key = (executor.capability, executor.build_digest)
        old = self._executors[key]
        self._executors[key] = executor
        return old

    def get(self, capability: str, build_digest: str) -> Executor | None:
        return self._executors.get((capability, build_digest))

    def reconciler(self, capability: str, build_digest: str) -> Reconciler | None:
        return self._reconcilers.get((capability, build_digest))

    def is_draining(self, capability: str, build_digest: str) -> bool:
        return (capability, build_digest) in self._draining

    def content_schema(self, capability: str, build_digest: str) -> LoadedContentSchema | None:
        return self._schemas.get((capability, build_digest))

    def entries(self) -> list[RegistryEntry]:
        """Every build in registration order, with its schema and schema digest."""
        found = []
        for key, e in self._executors.items():
            schema = self._schemas.get(key)
            found.append(
                RegistryEntry(
                    e.capability,
                    e.build_digest,
                    e.delivery_mode,
                    self._kinds[key],
                    key in self._reconcilers,
                    key in self._draining,
                    schema.schema if schema is not None else None,
                    schema.digest if schema is not None else NO_SCHEMA_DIGEST,
                )
            )
        return found

    def close(self) -> None:
        """Release what executors hold (HTTP connection pools)."""
        for executor in self._executors.values():
            close = getattr(executor, "close", None)
            if callable(close):
                close()
