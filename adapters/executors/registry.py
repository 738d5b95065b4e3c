"""Executors and reconcilers keyed by (capability, exact build digest)."""

from __future__ import annotations

from dataclasses import dataclass

from domain.directory import DeliveryMode
from domain.ports import Executor, Reconciler


@dataclass(frozen=True)
class RegistryEntry:
    """One registered executor build."""

    capability: str
    build_digest: str
    delivery_mode: DeliveryMode


class StaticExecutorRegistry:
    """Implements ``domain.ports.ExecutorRegistry`` with plain dicts."""

    def __init__(self) -> None:
        self._executors: dict[tuple[str, str], Executor] = {}
        self._reconcilers: dict[tuple[str, str], Reconciler] = {}

    def register(self, executor: Executor, reconciler: Reconciler | None = None) -> None:
        key = (executor.capability, executor.build_digest)
        if key in self._executors:
            raise ValueError(f"executor already registered: {key[0]} {key[1]}")
        self._executors[key] = executor
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

    def entries(self) -> list[RegistryEntry]:
        return [
            RegistryEntry(e.capability, e.build_digest, e.delivery_mode)
            for e in self._executors.values()
        ]
