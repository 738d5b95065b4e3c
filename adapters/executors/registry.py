"""Executors and reconcilers keyed by (capability, exact build digest)."""

from __future__ import annotations

from dataclasses import dataclass

from domain.directory import DeliveryMode
from domain.ports import Executor, Reconciler


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

    def register(
        self,
        executor: Executor,
        reconciler: Reconciler | None = None,
        *,
        kind: str = "fake",
        draining: bool = False,
    ) -> None:
        """Host one build. ``draining``: hosted for what is already bound to it,
        refused to new proposals (a rollover keeps the previous build beside the new)."""
        key = (executor.capability, executor.build_digest)
        if key in self._executors:
            raise DuplicateExecutor(f"executor already registered: {key[0]} {key[1]}")
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

    def entries(self) -> list[RegistryEntry]:
        return [
            RegistryEntry(
                e.capability,
                e.build_digest,
                e.delivery_mode,
                self._kinds[key],
                key in self._reconcilers,
                key in self._draining,
            )
            for key, e in self._executors.items()
        ]

    def close(self) -> None:
        """Release what executors hold (HTTP connection pools)."""
        for executor in self._executors.values():
            close = getattr(executor, "close", None)
            if callable(close):
                close()
