"""Head-of-line blocking, before and after, side by side in one run (SQLite).

Webhooks: two subscriptions, one receiver on loopback that answers 204 at
once and one that accepts every request and never answers (the sender's
timeout is 5 s). Facts arrive one every 0.25 s; each becomes a delivery record
for both subscriptions (written straight to the store, as the notifier writes
them). The figure is the healthy subscription's delivery latency, from the
record's write to its arrival at the receiver: p50, p99 and max. Before: the
one delivery thread of ``ledger serve`` (``head_of_line_before.OldDeliverer``);
after: the runtime's lane per subscription (no wake-up from the notifier, so
an idle lane looks every second). Target: p99 under 2 s while the other
receiver hangs.

Workers: a fast build (the fake provider, no delay) and a slow build whose
provider takes 2 s per call. The attempts are all queued first (the slow ones
spread among the fast ones), then the runtime's worker is started on the
store's notification log; the figure is the fast build's completion rate
(attempts recorded ``succeeded`` per second, until the last fast one is).
Before: the single worker thread (``head_of_line_before.serial_worker_loop``);
after: the bounded pool (16 in all, 4 per build). Target: the fast rate with
the slow build about the same as without it.

Run: ``.venv/bin/python bench/bench_head_of_line.py [--quick]``.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness import Report, parse_args, percentile
from head_of_line_before import OldDeliverer, old_delivery_row, serial_worker_loop

from adapters.backend import NotificationLogFeed
from adapters.bootstrap import Ledger, build_ledger
from adapters.executors.fake import fake_build_digest
from adapters.runtime import Runtime
from adapters.settings import load_settings
from adapters.webhooks.config import WebhookSubscription
from adapters.work_pool import WorkPool
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.notifications import NotificationType
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.timeutil import format_utc
from projections.ports import ViewRecord
from projections.webhooks import delivery_id, delivery_row

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FAST = "fake.provider_idempotency"
SLOW = "fake.correlation_lookup"


# -- receivers ---------------------------------------------------------------------


class Receivers:
    """Two loopback receivers: ``/healthy`` answers at once and notes when each
    webhook-id arrived; ``/hung`` reads the request and never answers."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.endswith("/hung"):
                    owner.release.wait(120)
                    return  # no answer: the connection closes with the server
                owner.arrived.setdefault(str(self.headers["webhook-id"]), time.perf_counter())
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def hook(url: str, ident: str, timeout: float) -> WebhookSubscription:
    return WebhookSubscription(
        id=ident,
        url=url,
        secret_env="HOOK_SECRET",
        events=frozenset(NotificationType),
        timeout_seconds=timeout,
        secret=SECRET,
    )


def fact_rows(n: int, subscriptions: list[str], now: str, old: bool) -> list[ViewRecord]:
    notification = f"msg_{n:040d}"
    rows = []
    for sub in subscriptions:
        data = {
            "delivery_id": delivery_id(sub, notification),
            "subscription_id": sub,
            "notification_id": notification,
            "type": "attempt.succeeded",
            "subject_id": f"att_{n:064d}",
            "subject_version": 5,
            "status": "pending",
            "attempts": 0,
            "next_try_at": now,
            "last_error": None,
            "response_status": None,
            "created_at": now,
            "updated_at": now,
            "delivered_at": None,
            "after": None,
            "body": {"attempt_id": f"att_{n:064d}", "status": "succeeded"},
        }
        rows.append(old_delivery_row(data, 1) if old else delivery_row(data, 1))
    return rows


def webhook_latency(
    folder: Path, *, old: bool, hung: bool, facts: int, timeout: float
) -> tuple[list[float], int]:
    """The healthy subscription's latencies (s) and how many never arrived."""
    receivers = Receivers()
    settings = load_settings(
        store="sqlite", sqlite_path=str(folder / f"hooks-{old}-{hung}.db"), env="test"
    )
    ledger = build_ledger(settings)
    subs = [hook(f"{receivers.url}/healthy", "healthy", timeout)]
    if hung:
        subs.append(hook(f"{receivers.url}/hung", "hung", timeout))
    ledger.webhooks = subs
    stop = threading.Event()
    runtime: Runtime | None = None
    if old:
        deliverer = OldDeliverer(ledger.views, {s.id: s for s in subs}, ledger.clock)
        thread = threading.Thread(target=deliverer.loop, args=(stop,), daemon=True)
        thread.start()
    else:
        runtime = Runtime(
            ledger, None, recovery_interval=3600, recovery=False, deliverer=ledger.make_deliverer()
        )
        runtime.start()
    written: dict[str, float] = {}
    try:
        for n in range(facts):
            now = format_utc(ledger.clock.now())
            rows = fact_rows(n, [s.id for s in subs], now, old)
            ledger.views.put_views(rows, [])
            written[f"msg_{n:040d}"] = time.perf_counter()
            time.sleep(0.25)
        deadline = time.monotonic() + 30 + facts * 2 * timeout
        while len(receivers.arrived) < facts and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        receivers.release.set()
        if runtime is not None:
            runtime.stop(grace=2 * timeout)
        receivers.close()
        ledger.close()
    latencies = [receivers.arrived[i] - t for i, t in written.items() if i in receivers.arrived]
    return latencies, facts - len(latencies)


# -- workers -----------------------------------------------------------------------


class Slow:
    """The slow build's provider: each call takes ``seconds``."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.seconds = seconds

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        time.sleep(self.seconds)
        receipt: ExecutionReceipt = self.inner.execute(request)
        return receipt


def approve_all(ledger: Ledger, fast: int, slow: int) -> tuple[list[str], list[str]]:
    from harness import Lifecycle

    life = Lifecycle(ledger.store, registry=ledger.registry, effects=ledger.effects)  # type: ignore[arg-type]
    fast_ids: list[str] = []
    slow_ids: list[str] = []
    every = max(1, fast // max(1, slow))
    for n in range(fast):
        if slow and n % every == 0 and len(slow_ids) < slow:
            _, token = life.propose_and_present(0, SLOW)
            slow_ids.append(life.approve(token))
        _, token = life.propose_and_present(0, FAST)
        fast_ids.append(life.approve(token))
    while len(slow_ids) < slow:
        _, token = life.propose_and_present(0, SLOW)
        slow_ids.append(life.approve(token))
    return fast_ids, slow_ids


def wait_terminal(ledger: Ledger, ids: list[str], limit: float) -> float:
    """Seconds until every attempt of ``ids`` has succeeded. One read at a time,
    in queue order (the order both paths take a build's attempts in), so the
    watching costs the worker next to nothing."""
    began = time.perf_counter()
    deadline = time.monotonic() + limit
    for attempt_id in ids:
        while True:
            attempt = ledger.store.get(ExecutionAttempt, attempt_id)
            if attempt is not None and attempt.status is AttemptStatus.SUCCEEDED:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{attempt_id} never finished")
            time.sleep(0.01)
    return time.perf_counter() - began


def fast_rate(
    folder: Path, *, old: bool, slow: int, fast: int, slow_seconds: float
) -> tuple[float, float]:
    """(fast attempts per second, seconds until the last fast one succeeded)."""
    settings = load_settings(
        store="sqlite",
        sqlite_path=str(folder / f"work-{old}-{slow}.db"),
        env="test",
        lease_seconds=120,
    )
    ledger = build_ledger(settings)
    assert ledger.registry is not None
    slow_executor = Slow(ledger.registry.get(SLOW, fake_build_digest(SLOW)), slow_seconds)
    ledger.registry.replace(slow_executor)  # type: ignore[attr-defined]
    fast_ids, slow_ids = approve_all(ledger, fast, slow)
    feed = NotificationLogFeed(ledger.store.recorder, from_start=True)  # type: ignore[arg-type]
    stop = threading.Event()
    runtime: Runtime | None = None
    if old:
        thread = threading.Thread(target=serial_worker_loop, args=(ledger, feed, stop))
        thread.start()
    else:
        runtime = Runtime(
            ledger,
            feed,
            recovery_interval=3600,
            recovery=False,
            poll_seconds=0.05,
            pool=WorkPool(total=16, per_build=4),
        )
        runtime.start()
    try:
        took = wait_terminal(ledger, fast_ids, 600)
        wait_terminal(ledger, slow_ids, 600)  # the rest, before the store closes
    finally:
        stop.set()
        if runtime is not None:
            runtime.stop(grace=30)
        else:
            thread.join(60)
        ledger.close()
    return len(fast_ids) / took, took


def ratio(after: float, before: float) -> str:
    return f"{after / before:.2f}" if before else "-"


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_head_of_line", args.quick)
    facts, timeout = (4, 1.0) if args.quick else (12, 5.0)
    fast, slow, slow_seconds = (30, 4, 0.5) if args.quick else (200, 20, 2.0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = []
        for hung in (False, True):
            figures: dict[bool, tuple[list[float], int]] = {}
            for old in (True, False):
                figures[old] = webhook_latency(
                    folder, old=old, hung=hung, facts=facts, timeout=timeout
                )

            def show(values: list[float], q: Callable[[list[float]], float]) -> str:
                return f"{q(values):.2f}" if values else "-"

            label = "healthy + one hung receiver" if hung else "healthy receiver only"
            before, after = figures[True][0], figures[False][0]
            rows.append(
                [
                    label,
                    show(before, lambda v: percentile(v, 50)),
                    show(after, lambda v: percentile(v, 50)),
                    show(before, lambda v: percentile(v, 99)),
                    show(after, lambda v: percentile(v, 99)),
                    show(before, max),
                    show(after, max),
                    f"{figures[True][1]} / {figures[False][1]}",
                ]
            )
        report.table(
            f"Webhooks: healthy subscription's delivery latency, seconds ({facts} facts, "
            f"one every 0.25 s; the hung receiver's timeout {timeout:g} s)",
            [
                "subscriptions",
                "p50 before",
                "p50 after",
                "p99 before",
                "p99 after",
                "max before",
                "max after",
                "never arrived (before / after)",
            ],
            rows,
        )
        rates: dict[tuple[bool, int], tuple[float, float]] = {}
        for count in (0, slow):
            for old in (True, False):
                rates[(old, count)] = fast_rate(
                    folder, old=old, slow=count, fast=fast, slow_seconds=slow_seconds
                )
        work_rows = []
        for count in (0, slow):
            before, after = rates[(True, count)], rates[(False, count)]
            work_rows.append(
                [
                    f"{fast} fast"
                    + (f" + {count} slow ({slow_seconds:g} s per call)" if count else ""),
                    f"{before[0]:.1f}",
                    f"{after[0]:.1f}",
                    ratio(after[0], before[0]),
                    f"{before[1]:.1f}",
                    f"{after[1]:.1f}",
                ]
            )
        work_rows.append(
            [
                "**with slow / without, same path**",
                ratio(rates[(True, slow)][0], rates[(True, 0)][0]),
                ratio(rates[(False, slow)][0], rates[(False, 0)][0]),
                "",
                "",
                "",
            ]
        )
        report.table(
            "Workers: the fast build's completion rate (attempts succeeded per second)",
            [
                "attempts queued",
                "before (one thread)",
                "after (pool 16 / 4 per build)",
                "after / before",
                "s to the last fast one, before",
                "after",
            ],
            work_rows,
        )
    report.write(__doc__ or "")


if __name__ == "__main__":
    main()
