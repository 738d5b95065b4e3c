"""Plugin factories for the loader tests: good ones, broken ones, duplicates."""

from __future__ import annotations

from typing import Any

from adapters.executors.digest import build_digest, code_identity
from adapters.executors.loader import Registration
from domain.directory import DeliveryMode
from domain.ports import ExecutionReceipt, ExecutionRequest, ReconcileAnswer


class SampleExecutor:
    def __init__(
        self,
        capability: str = "sample.write",
        mode: DeliveryMode = DeliveryMode.PROVIDER_IDEMPOTENCY,
        digest: str | None = None,
    ) -> None:
        self.capability = capability
        self.delivery_mode = mode
        self.build_digest = digest or build_digest(code_identity(__name__), {"c": capability})
        self.closed = False

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        return ExecutionReceipt({"sample_id": "s1"})

    def close(self) -> None:
        self.closed = True


class SampleReconciler:
    def lookup(self, request: ExecutionRequest) -> ReconcileAnswer:
        return ReconcileAnswer("unknown")


def good(settings: Any) -> list[Any]:
    return [
        SampleExecutor(),
        Registration(
            SampleExecutor("sample.lookup", DeliveryMode.CORRELATION_LOOKUP), SampleReconciler()
        ),
    ]


def raising(settings: Any) -> list[Any]:
    raise RuntimeError("cannot reach the plugin's configuration")


def leaking(settings: Any) -> list[Any]:
    raise RuntimeError("failed with api_key=sk_live_canary_plugin_secret")


def bad_digest(settings: Any) -> list[Any]:
    return [SampleExecutor(digest="md5:abc")]


def bad_mode(settings: Any) -> list[Any]:
    executor = SampleExecutor()
    executor.delivery_mode = "at_most_twice"  # type: ignore[assignment]
    return [executor]


def lookup_without_reconciler(settings: Any) -> list[Any]:
    return [SampleExecutor("sample.lookup", DeliveryMode.CORRELATION_LOOKUP)]


def not_iterable(settings: Any) -> Any:
    return 42


def duplicate_of_good(settings: Any) -> list[Any]:
    return [SampleExecutor()]


not_a_factory = "just a string"
