"""No head-of-line blocking, on memory, SQLite and DynamoDB: a build whose
executor calls block keeps only its own slots, so another build's attempt
completes while the slow calls are still blocked; a subscription whose
receiver hangs keeps only its own lane, so another subscription's deliveries
are acknowledged while the hung send is still open; and a delivery pass reads
only what is due. Behaviour, not timing: the blocked parts wait on events."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.runtime import Runtime
from adapters.store import LedgerStore
from adapters.webhooks.deliverer import Deliverer, DeliveryFailed
from adapters.work_pool import WorkPool
from domain.attempt import ExecutionAttempt
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.approval import approve
from domain.timeutil import format_utc
from projections.ports import ViewRecord
from projections.webhooks import delivery_list_key, delivery_row
from tests.support.subscribers import drain
from tests.support.webhooks import record, subscription, webhook_ledger
from tests.support.worlds.execution import ExecutionWorld

WAIT = 30.0  # a bound on waiting for what is expected to happen (never an assertion of time)
SLOW = "fake.provider_idempotency"
FAST = "fake.correlation_lookup"


@pytest.fixture
def pworld(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    return ExecutionWorld(store, registry=registry, effects=register_fakes(registry))


def until(condition: Callable[[], Any], what: str) -> Any:
    """Wait (bounded) for a state of the store; the assertion is the state itself."""
    done = threading.Event()
    for _ in range(int(WAIT / 0.02)):
        value = condition()
        if value:
            return value
        done.wait(0.02)
    raise AssertionError(f"never reached: {what}")


class ListFeed:
    """Hands out the ids it was given once, then nothing (a hint, as the store's feed)."""

    trigger = "test"

    def __init__(self, ids: Sequence[str]) -> None:
        self.ids = list(ids)
        self.idle = threading.Event()

    def poll(self, wait_seconds: float) -> list[str]:
        batch, self.ids = self.ids, []
        if not batch:
            self.idle.wait(wait_seconds)
        return batch


class Blocking:
    """An executor whose calls wait for ``release``, counting those that started."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started = 0

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        with self.lock:
            self.started += 1
        assert self.release.wait(WAIT)
        receipt: ExecutionReceipt = self.inner.execute(request)
        return receipt


def approved(world: ExecutionWorld, capability: str) -> str:
    proposal_id = world.propose(
        capability=capability,
        executor_build=fake_build_digest(capability),
        content={"title": "Buy milk", "simulate": "success"},
    )
    token = world.present(proposal_id).token
    return approve(world.ctx, token=token, provenance=world.who).attempt_id


def status(ledger: Ledger, attempt_id: str) -> str:
    attempt = ledger.store.get(ExecutionAttempt, attempt_id)
    assert attempt is not None
    return attempt.status.value


def test_a_blocked_build_does_not_hold_another_builds_attempt(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger = webhook_ledger(store, pworld, request, [])
    assert ledger.registry is not None
    slow = Blocking(ledger.registry.get(SLOW, fake_build_digest(SLOW)))
    ledger.registry.replace(slow)  # type: ignore[attr-defined]
    slow_ids = [approved(pworld, SLOW) for _ in range(5)]
    fast_id = approved(pworld, FAST)
    runtime = Runtime(
        ledger,
        ListFeed([*slow_ids, fast_id]),  # the slow ones first: today's order would block
        recovery_interval=3600,
        recovery=False,
        poll_seconds=0.01,
        pool=WorkPool(total=8, per_build=4),
    )
    runtime.start()
    try:
        until(lambda: status(ledger, fast_id) == "succeeded", "the fast build's attempt succeeds")
        until(lambda: slow.started == 4, "four slow calls in flight")
        # the slow calls are still blocked: at their build's bound, the fifth queued
        assert not slow.release.is_set()
        assert slow.started == 4
        assert Counter(status(ledger, i) for i in slow_ids) == {"executing": 4, "queued": 1}
        slow.release.set()
        until(
            lambda: all(status(ledger, i) == "succeeded" for i in slow_ids),
            "every slow attempt succeeds once released",
        )
    finally:
        slow.release.set()
        report = runtime.stop(grace=WAIT)
    assert report.left_running == 0
    assert runtime.pool is not None and runtime.pool.peak_running[(SLOW, slow.build_digest)] == 4


class LaneTransport:
    """Receivers by URL: ``hung`` holds every request until released (as a receiver
    that accepts and never answers), the others answer 204 at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.posts: Counter[str] = Counter()

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        with self.lock:
            self.posts[url] += 1
        if url.endswith("/hung") and not self.release.wait(WAIT):
            raise DeliveryFailed("timeout")
        return 204


def delivered(ledger: Ledger, subscription_id: str) -> int:
    assert ledger.views is not None
    rows, _ = ledger.views.list_views(delivery_list_key("delivered"), 500)
    return sum(r.data["subscription_id"] == subscription_id for r in rows)


def two_lanes(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest, facts: int
) -> tuple[Ledger, LaneTransport]:
    ledger = webhook_ledger(
        store,
        pworld,
        request,
        [
            subscription("http://receiver.invalid/hung", "hung", timeout=5),
            subscription("http://receiver.invalid/healthy", "healthy"),
        ],
    )
    worker = pworld.worker()
    for _ in range(facts):
        attempt_id = pworld.approved("provider_idempotency")
        assert worker.process(attempt_id).value == "succeeded"
    drain(ledger)
    return ledger, LaneTransport()


def test_a_hung_receiver_delays_only_its_own_subscription_in_the_runtime(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger, transport = two_lanes(store, pworld, request, facts=3)
    runtime = Runtime(
        ledger,
        None,
        recovery_interval=3600,
        recovery=False,
        poll_seconds=0.01,
        deliverer=ledger.make_deliverer(transport=transport, random=lambda: 0.0),
    )
    runtime.start()
    try:
        until(lambda: delivered(ledger, "healthy") == 3, "the healthy lane delivers all three")
        assert not transport.release.is_set()  # the hung lane's first send is still open
        assert transport.posts["http://receiver.invalid/hung"] == 1
        assert delivered(ledger, "hung") == 0
        transport.release.set()
        until(lambda: delivered(ledger, "hung") == 3, "the hung lane catches up once released")
    finally:
        transport.release.set()
        runtime.stop(grace=WAIT)
    assert transport.posts == {
        "http://receiver.invalid/hung": 3,
        "http://receiver.invalid/healthy": 3,
    }


def test_one_pass_runs_the_lanes_side_by_side(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    """The Lambda's pass (``run_once``): the healthy subscription's sends are all
    recorded while the hung one's first send is still open."""
    ledger, transport = two_lanes(store, pworld, request, facts=2)
    deliverer = ledger.make_deliverer(transport=transport, random=lambda: 0.0)
    sent: list[int] = []
    passing = threading.Thread(target=lambda: sent.append(deliverer.run_once()))
    passing.start()
    try:
        until(lambda: delivered(ledger, "healthy") == 2, "the healthy lane delivers both")
        assert not transport.release.is_set()
        assert delivered(ledger, "hung") == 0
    finally:
        transport.release.set()
        passing.join(WAIT)
    assert sent == [4]
    assert delivered(ledger, "hung") == 2


class CountingViews:
    """A view store that counts the rows its lists return."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rows_listed = 0

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None, *, until: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        rows, more = self.inner.list_views(list_pk, limit, cursor, until=until)
        self.rows_listed += len(rows)
        return rows, more

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_delivery_pass_reads_what_is_due_not_the_backlog(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription("http://r.invalid/chat")])
    assert ledger.views is not None
    now = pworld.clock.now()
    later, earlier = format_utc(now + timedelta(hours=1)), format_utc(now - timedelta(seconds=1))
    for n in range(60):  # failing, backing off: not due
        ledger.views.put_view(delivery_row(record(n, "failing", next_try_at=later), 3))
    for n in range(60, 120):  # another subscription's, due
        data = record(n, "pending", subscription_id="other", next_try_at=earlier)
        ledger.views.put_view(delivery_row({**data, "delivery_id": f"whd_other{n}"}, 3))
    for n in range(120, 123):  # due
        ledger.views.put_view(delivery_row(record(n, "failing", next_try_at=earlier), 3))
    counting = CountingViews(ledger.views)
    transport = LaneTransport()
    deliverer = Deliverer(
        counting, {s.id: s for s in ledger.webhooks}, ledger.clock, transport=transport
    )
    assert deliverer.run_lane("chat") == 3
    assert counting.rows_listed == 3
    assert transport.posts == {"http://r.invalid/chat": 3}


@pytest.mark.parametrize("round_", range(3))
def test_attempts_of_three_builds_on_the_pool_each_run_once(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest, round_: int
) -> None:
    """Every hint twice, and recovery ticking beside the feed: each attempt is
    leased and called once, settles, and no build ever ran more than its bound."""
    ledger = webhook_ledger(store, pworld, request, [])
    modes = ["provider_idempotency", "correlation_lookup", "operator_reconciliation_only"]
    ids = [pworld.approved(modes[n % 3]) for n in range(24)]
    pool = WorkPool(total=5, per_build=2)
    runtime = Runtime(
        ledger,
        ListFeed([*ids, *reversed(ids)]),
        recovery_interval=0.01,
        poll_seconds=0.01,
        pool=pool,
    )
    runtime.start()
    try:
        until(lambda: all(status(ledger, i) == "succeeded" for i in ids), "every attempt succeeds")
    finally:
        report = runtime.stop(grace=WAIT)
    assert report.left_running == 0
    effects = ledger.effects
    assert effects is not None
    for attempt_id in ids:
        key = pworld.attempt(attempt_id).idempotency_key
        assert [k for _, k in effects.calls].count(key) == 1, attempt_id
        assert len(effects.effects[key]) == 1
    assert max(pool.peak_running.values()) <= 2
    assert len(pool.peak_running) == 3
