"""Fake executors and reconciler for development, demos and tests.

Behaviour is chosen by the spec's ``content["simulate"]``: ``success`` (default),
``no_write_error``, ``timeout_before_effect``, ``timeout_after_effect``,
``unsafe_receipt``, ``slow`` (exceeds the deadline after applying) and
``lookup_unknown`` (succeeds, but the reconciler cannot tell). The fake keeps
an effect ledger by idempotency key so tests can count real effects.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from adapters.executors.registry import StaticExecutorRegistry
from domain.directory import DeliveryMode
from domain.errors import ExecutorNoEffect, ExecutorOutcomeUncertain
from domain.ports import ExecutionReceipt, ExecutionRequest, ReconcileAnswer
from domain.spec import sha256_tag

FAKE_CAPABILITIES: dict[str, DeliveryMode] = {
    "fake.provider_idempotency": DeliveryMode.PROVIDER_IDEMPOTENCY,
    "fake.correlation_lookup": DeliveryMode.CORRELATION_LOOKUP,
    "fake.operator_only": DeliveryMode.OPERATOR_RECONCILIATION_ONLY,
}


def fake_build_digest(capability: str) -> str:
    """The fixed build digest of a fake executor."""
    return sha256_tag(f"fake-executor/{capability}/v1".encode())


@dataclass
class EffectLedger:
    """Real effects by idempotency key, and every call made (thread-safe)."""

    effects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record_call(self, capability: str, key: str) -> None:
        with self._lock:
            self.calls.append((capability, key))

    def apply(self, key: str, receipt: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.effects.setdefault(key, []).append(receipt)
            return receipt

    def first(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.effects.get(key)
            return dict(found[0]) if found else None

    def effect_count(self, key: str) -> int:
        with self._lock:
            return len(self.effects.get(key, []))

    def max_effects_per_key(self) -> int:
        with self._lock:
            return max((len(v) for v in self.effects.values()), default=0)

    def call_count(self) -> int:
        with self._lock:
            return len(self.calls)


def _simulate(request: ExecutionRequest) -> str:
    value = request.spec.content.get("simulate", "success")
    return value if isinstance(value, str) else "success"


class FakeExecutor:
    """One fake capability. Provider-idempotent builds replay the first receipt."""

    def __init__(self, capability: str, ledger: EffectLedger) -> None:
        self.capability = capability
        self.build_digest = fake_build_digest(capability)
        self.delivery_mode = FAKE_CAPABILITIES[capability]
        self.ledger = ledger

    def _receipt(self, request: ExecutionRequest) -> dict[str, Any]:
        return {
            "provider_id": "fake_" + request.idempotency_key[4:20],
            "request_hash": sha256_tag(request.idempotency_key.encode()),
        }

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        key = request.idempotency_key
        self.ledger.record_call(self.capability, key)
        mode = _simulate(request)
        if self.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY:
            previous = self.ledger.first(key)
            if previous is not None:
                return ExecutionReceipt(previous)
        if mode == "no_write_error":
            raise ExecutorNoEffect()
        if mode == "timeout_before_effect":
            raise ExecutorOutcomeUncertain()
        receipt = self.ledger.apply(key, self._receipt(request))
        if mode in ("timeout_after_effect", "slow"):
            raise ExecutorOutcomeUncertain()
        if mode == "unsafe_receipt":
            return ExecutionReceipt({**receipt, "api_secret": "sk_live_canary_do_not_store"})
        return ExecutionReceipt(receipt)


class FakeReconciler:
    """Read-only lookup in the effect ledger by idempotency key."""

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger

    def lookup(self, request: ExecutionRequest) -> ReconcileAnswer:
        self.ledger.lookups.append(request.idempotency_key)
        if _simulate(request) == "lookup_unknown":
            return ReconcileAnswer("unknown")
        found = self.ledger.first(request.idempotency_key)
        if found is None:
            return ReconcileAnswer("not_applied")
        return ReconcileAnswer("applied", found)


def register_fakes(
    registry: StaticExecutorRegistry, ledger: EffectLedger | None = None
) -> EffectLedger:
    """Register the three fake executors (and the lookup reconciler); returns the ledger."""
    ledger = ledger or EffectLedger()
    for capability, mode in FAKE_CAPABILITIES.items():
        reconciler = FakeReconciler(ledger) if mode is DeliveryMode.CORRELATION_LOOKUP else None
        registry.register(FakeExecutor(capability, ledger), reconciler)
    return ledger
