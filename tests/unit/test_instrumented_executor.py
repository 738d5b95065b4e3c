"""The instrumented executor the live worker is handed keeps what the worker reads
from a build: a dropped settle window made every configured window 0."""

from __future__ import annotations

from typing import Any

from adapters.executors.fake import EffectLedger, FakeExecutor
from adapters.executors.registry import StaticExecutorRegistry
from adapters.instrumentation import InstrumentedRegistry
from adapters.metrics import Metrics
from domain.directory import DeliveryMode
from domain.services.worker_policy import settle_seconds


def _wrapped(executor: Any) -> Any:
    registry = StaticExecutorRegistry()
    registry.register(executor)
    found = InstrumentedRegistry(registry, Metrics()).get(
        executor.capability, executor.build_digest
    )
    assert found is not None and found is not executor
    return found


def test_the_settle_window_of_a_build_reaches_the_worker_through_the_wrapper() -> None:
    executor = FakeExecutor("fake.correlation_lookup", EffectLedger())
    executor.settle_seconds = 45.0  # type: ignore[attr-defined]
    assert settle_seconds(_wrapped(executor)) == 45.0


class _Plain:
    """An executor of the narrow contract that declares no settle window."""

    capability = "plugin.plain"
    build_digest = "sha256:" + "0" * 64
    delivery_mode = DeliveryMode.PROVIDER_IDEMPOTENCY

    def execute(self, request: Any) -> Any:
        raise AssertionError("not called")


def test_a_build_without_a_settle_window_has_none_through_the_wrapper() -> None:
    executor = _Plain()
    assert settle_seconds(_wrapped(executor)) == 0.0
