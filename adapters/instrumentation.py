"""Metrics and spans around the ports the use cases call: executors and the store.

The wrappers change nothing the domain sees: the same answers, the same
exceptions. They add the executor-call latency histogram (by capability and
outcome), an executor-call span and a span per store commit. Attributes are
ids, counts and outcomes; never content, tokens, receipts or error messages.
"""

from __future__ import annotations

import time
from typing import Any

from adapters.metrics import EXECUTOR_OUTCOMES, Metrics, safe_label
from domain.errors import ExecutorNoEffect
from domain.ports import (
    Commit,
    ContentSchema,
    ExecutionReceipt,
    ExecutionRequest,
    Executor,
    Reconciler,
)
from domain.tracing import NullTracer, Tracer


class InstrumentedExecutor:
    """An executor timed into ``ledger_executor_call_duration_seconds`` and traced."""

    def __init__(
        self, inner: Executor, metrics: Metrics, tracer: Tracer, capabilities: frozenset[str]
    ) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        # The worker reads the build's settle window from the executor it is
        # handed (worker_policy.settle_seconds): a wrapper that dropped it would
        # make every configured window 0 in the live worker.
        if hasattr(inner, "settle_seconds"):
            self.settle_seconds = inner.settle_seconds
        self._metrics = metrics
        self._tracer = tracer
        self._label = safe_label(inner.capability, capabilities)

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        outcome = "error"
        started = time.perf_counter()
        attributes = {"ledger.attempt_id": request.attempt_id, "ledger.capability": self._label}
        with self._tracer.span("ledger.executor.call", attributes) as span:
            try:
                receipt = self.inner.execute(request)
                outcome = "ok"
                return receipt
            except ExecutorNoEffect:
                outcome = "no_effect"
                raise
            finally:
                span.set("ledger.executor_outcome", outcome)
                self._metrics.observe(
                    "ledger_executor_call_duration_seconds",
                    time.perf_counter() - started,
                    capability=self._label,
                    outcome=safe_label(outcome, EXECUTOR_OUTCOMES),
                )


class InstrumentedRegistry:
    """Implements ``domain.ports.ExecutorRegistry`` over another, instrumenting executors."""

    def __init__(self, inner: Any, metrics: Metrics, tracer: Tracer | None = None) -> None:
        self.inner = inner
        self.metrics = metrics
        self.tracer: Tracer = tracer or NullTracer()

    def get(self, capability: str, build_digest: str) -> Executor | None:
        found: Executor | None = self.inner.get(capability, build_digest)
        if found is None:
            return None
        capabilities = frozenset(e.capability for e in self.inner.entries())
        return InstrumentedExecutor(found, self.metrics, self.tracer, capabilities)

    def reconciler(self, capability: str, build_digest: str) -> Reconciler | None:
        found: Reconciler | None = self.inner.reconciler(capability, build_digest)
        return found

    def is_draining(self, capability: str, build_digest: str) -> bool:
        return bool(self.inner.is_draining(capability, build_digest))

    def content_schema(self, capability: str, build_digest: str) -> ContentSchema | None:
        found: ContentSchema | None = self.inner.content_schema(capability, build_digest)
        return found


class TracedStore:
    """The event store with one span per commit (its attempt id and event count)."""

    def __init__(self, inner: Any, tracer: Tracer) -> None:
        self.inner = inner
        self.tracer = tracer

    def commit(self, commit: Commit) -> None:
        attributes: dict[str, str | int] = {"ledger.aggregates": len(commit.aggregates)}
        for aggregate in commit.aggregates:
            if aggregate.id.startswith("att_"):
                attributes["ledger.attempt_id"] = aggregate.id
        with self.tracer.span("ledger.store.commit", attributes):
            self.inner.commit(commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
