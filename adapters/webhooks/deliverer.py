"""Sends the pending webhook deliveries: at least once, in order per attempt.

Every subscription is a lane of its own: a pass of one subscription reads only
its records whose next try has come (``projections.webhooks.due``: a range
read of the due lists, so its cost is what is due, not the backlog), and
POSTs each signed as Standard Webhooks, one after another. Lanes never wait
for each other, so a receiver that hangs until the timeout delays only its
own subscription (``run_once`` runs the lanes side by side; ``ledger serve``
keeps one thread per lane). A later notification for the same attempt waits
until the earlier one (the record's ``after``) is acknowledged (any 2xx). A failure is
classified (``timeout``, ``connect``, ``transport``, ``http_status`` with the
status code, ``redirect``) without reading the receiver's body, and retried
after a capped exponential backoff with full jitter. Every move of a record is
a version-guarded write, so two deliverers never both record a move; what is
repeated after a crash is only what had not been recorded as acknowledged.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from adapters.webhooks import standard
from adapters.webhooks.config import WebhookSubscription
from domain.errors import IllegalTransition
from domain.ports import Clock
from domain.timeutil import format_utc, parse_utc
from projections.ports import ViewRecord, ViewStore
from projections.webhook_retention import is_trimmed
from projections.webhooks import (
    DELIVERY_VIEW,
    OUTSTANDING,
    DeliveryStatus,
    chained,
    delivery_row,
    due,
    legacy_outstanding,
)

logger = logging.getLogger("ledger.webhooks")

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 300.0
# A claim outlasts the longest send: httpx's timeout bounds each of connect, write,
# read and pool wait, so four of them, and a margin.
CLAIM_MARGIN_SECONDS = 5.0
ERROR_CLASSES = frozenset({"timeout", "connect", "transport", "http_status", "redirect", "error"})
LANE_PAGE = 100
"""Due records one lane reads per pass (the lane runs again at once when it sent any)."""
_OUTSTANDING = frozenset(status.value for status in OUTSTANDING)
MAX_CHAIN = 64  # facts of one subject followed back to the earliest unacknowledged one


class DeliveryTrimmed(IllegalTransition):
    """The delivery was made and its record trimmed after the retention: there is
    no body to send again (its fact stays in the log)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(
            f"delivered at {data.get('delivered_at') or '?'} and trimmed after the "
            "retention (LEDGER_WEBHOOK_RETENTION_SECONDS): nothing left to send; its fact "
            f"stays in the log (ledger audit show {str(data.get('subject_id', '?'))[:80]})"
        )


class DeliveryFailed(Exception):
    """A send that got no acknowledgement; ``kind`` is one of ``ERROR_CLASSES``."""

    def __init__(self, kind: str, status: int | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.status = status


class Transport(Protocol):
    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        """POST and return the status code without reading the body; raise
        ``DeliveryFailed`` when no status came back."""
        ...


class HttpxTransport:
    """One httpx client reusing its connections; no redirects, no proxies from the environment."""

    def __init__(self) -> None:
        import httpx

        self._httpx = httpx
        self.client = httpx.Client(follow_redirects=False, trust_env=False)

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        httpx = self._httpx
        try:
            with self.client.stream(
                "POST", url, headers=dict(headers), content=body, timeout=httpx.Timeout(timeout)
            ) as response:
                return int(response.status_code)  # the body is never read
        except httpx.TimeoutException:
            raise DeliveryFailed("timeout") from None
        except httpx.ConnectError:
            raise DeliveryFailed("connect") from None
        except httpx.TransportError:
            raise DeliveryFailed("transport") from None

    def close(self) -> None:
        self.client.close()


def backoff_seconds(
    attempts: int,
    draw: float,
    *,
    base: float = BACKOFF_BASE_SECONDS,
    cap: float = BACKOFF_MAX_SECONDS,
) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**(attempts-1)))."""
    ceiling = min(cap, base * (2 ** min(max(attempts - 1, 0), 32)))
    return float(max(0.0, min(1.0, draw)) * ceiling)


@dataclass
class Deliverer:
    """Delivers outstanding records; ``random`` and ``clock`` are injected for tests."""

    views: ViewStore
    subscriptions: Mapping[str, WebhookSubscription]
    clock: Clock
    transport: Transport = field(default_factory=HttpxTransport)
    random: Callable[[], float] = field(default_factory=lambda: random.SystemRandom().random)
    wall: Callable[[], float] = time.time  # webhook-timestamp: the receiver's clock check
    on_result: Callable[[str], None] | None = None
    base_seconds: float = BACKOFF_BASE_SECONDS
    max_seconds: float = BACKOFF_MAX_SECONDS

    def run_once(
        self, *, subjects: Collection[str] | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        """One pass of every subscription, the lanes side by side; returns how many
        sends were made. ``subjects`` limits it to those attempts and proposals;
        ``stop`` ends it early (a Lambda's time)."""
        lanes = list(self.subscriptions)
        if len(lanes) <= 1:
            return sum(self.run_lane(lane, subjects=subjects, stop=stop) for lane in lanes)
        with ThreadPoolExecutor(len(lanes), thread_name_prefix="webhook-lane") as pool:
            futures = [
                pool.submit(self.run_lane, lane, subjects=subjects, stop=stop) for lane in lanes
            ]
        # every lane has finished; a failing one (the store) fails the pass after the rest
        return sum(future.result() for future in futures)

    def run_lane(
        self,
        subscription_id: str,
        *,
        subjects: Collection[str] | None = None,
        stop: Callable[[], bool] | None = None,
        limit: int = LANE_PAGE,
    ) -> int:
        """One pass of one subscription: its due records, soonest first, one at a
        time; returns how many sends were made."""
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return 0  # its records are kept and listed, not sent
        now = self.clock.now()
        sent = 0
        for row in due(self.views, subscription_id, now, limit):
            if subjects is not None and row.data["subject_id"] not in subjects:
                continue
            if stop is not None and stop():
                break
            before = self._blocking(row)
            if before is None:
                sent += self.deliver(row, subscription) is not None
            elif parse_utc(before.data["next_try_at"]) <= now:
                # the subject's earliest unacknowledged fact is due: it goes first
                sent += self.deliver(before, subscription) is not None
            else:  # wait for it: not read again before its next try
                then = before.data["next_try_at"]
                self.views.put_view(
                    delivery_row({**row.data, "next_try_at": then}, row.version + 1)
                )
        return sent

    def _blocking(self, row: ViewRecord) -> ViewRecord | None:
        """The earliest fact of the record's subject that is not acknowledged yet
        (following ``after``), or None when nothing before it waits."""
        found: ViewRecord | None = None
        after = row.data.get("after")
        for _ in range(MAX_CHAIN):
            if not after:
                break
            before = self.views.get_view(DELIVERY_VIEW, after)
            if before is None or before.data["status"] not in _OUTSTANDING:
                break  # acknowledged (or gone with its subscription's old events)
            found, after = before, before.data.get("after")
        return found

    def adopt_legacy(self) -> int:
        """Move the outstanding records written before the due lists into them,
        each naming the one before it of its subject; returns how many moved.
        Each move is version-guarded, so a record another deliverer moved first
        is left as it is."""
        moved = 0
        for row, before in chained(legacy_outstanding(self.views)):
            data = {**row.data, "after": row.data.get("after", before)}
            moved += self.views.put_view(delivery_row(data, row.version + 1))
        return moved

    def deliver(self, row: ViewRecord, subscription: WebhookSubscription) -> bool | None:
        """Claim one record, send it and record the result; True when acknowledged,
        None when another deliverer had claimed it.

        The claim is a version-guarded write that moves ``next_try_at`` past the
        send's timeout: a second deliverer (another process, a concurrent Lambda)
        sees the record as not due, or loses the claim, and does not send it too.
        A process that dies after its claim leaves the record due again once the
        claim has lapsed."""
        data = dict(row.data)
        claimed_until = self.clock.now() + timedelta(
            seconds=4 * subscription.timeout_seconds + CLAIM_MARGIN_SECONDS
        )
        claim = {**data, "next_try_at": format_utc(claimed_until)}
        if not self.views.put_view(delivery_row(claim, row.version + 1)):
            return None  # another deliverer moved it first
        version = row.version + 2
        body = standard.body(data["type"], data["body"])
        signed = standard.headers(
            subscription.secret, data["notification_id"], int(self.wall()), body
        )
        status: int | None = None
        try:
            status = self.transport.post(
                subscription.url, signed, body, subscription.timeout_seconds
            )
            error = (
                None
                if 200 <= status < 300
                else ("redirect" if 300 <= status < 400 else "http_status")
            )
        except DeliveryFailed as exc:
            error = exc.kind if exc.kind in ERROR_CLASSES else "error"
        except Exception as exc:  # a transport bug must not stop the loop; never the text
            logger.error("webhook send failed: %s", type(exc).__name__)
            error = "error"
        now = self.clock.now()
        data["attempts"] = int(data["attempts"]) + 1
        data["response_status"] = status
        data["updated_at"] = format_utc(now)
        if error is None:
            data.update(
                status=DeliveryStatus.DELIVERED.value, last_error=None, delivered_at=format_utc(now)
            )
        else:
            wait = backoff_seconds(
                data["attempts"], self.random(), base=self.base_seconds, cap=self.max_seconds
            )
            data.update(
                status=DeliveryStatus.FAILING.value,
                last_error=error,
                next_try_at=format_utc(now + timedelta(seconds=wait)),
            )
        moved = self.views.put_view(delivery_row(data, version))
        outcome = "delivered" if error is None else "failed"
        if moved:
            logger.info(
                "webhook delivery=%s subscription=%s outcome=%s error=%s",
                data["delivery_id"],
                data["subscription_id"],
                outcome,
                error or "-",
            )
        if self.on_result is not None:
            self.on_result(outcome)
        return error is None

    def close(self) -> None:
        close = getattr(self.transport, "close", None)
        if callable(close):
            close()


def redeliver(views: ViewStore, delivery_id: str, clock: Clock) -> dict[str, Any] | None:
    """Make one record pending again, due now (None when there is no such record).
    A delivered record is sent once more; a failing one is tried at once. A record
    trimmed after the retention has no body left to send: ``DeliveryTrimmed``."""
    for _ in range(8):
        row = views.get_view(DELIVERY_VIEW, delivery_id)
        if row is None:
            return None
        if is_trimmed(row.data):
            raise DeliveryTrimmed(row.data)
        data = dict(row.data)
        now = format_utc(clock.now())
        data.update(status=DeliveryStatus.PENDING.value, next_try_at=now, updated_at=now)
        if views.put_view(delivery_row(data, row.version + 1)):
            return data
    return None
