"""The ledger's metrics on ``prometheus_client`` (served at ``/metrics`` to a scraper).

Every label has a closed set of values (I10): route *templates*, outcomes from
enums, registered capabilities. A value outside the set is folded to
``other``, so no id, token or content can become a label, and the number of
series stays bounded. Approval refusals are counted as one ``refused`` result:
the uniform 404 hides why, so the metrics must not say it either.

Gauges are computed from the views and the due-work index when scraped (see
:class:`ViewGauges`); another read model adds its own gauges with
:meth:`Metrics.add_gauge_source` (projection lag, webhook backlog).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger("ledger.metrics")
disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series double the page

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"
_LABEL_VALUE = re.compile(r"^[a-z0-9_.\-]{1,64}$")
_ROUTE_VALUE = re.compile(r"^/[A-Za-z0-9_./{}\-]{0,200}$")

_BOUNDED_BY_CALLER = frozenset({"route", "method", "status"})  # templates, verbs, classes
APPROVAL_RESULTS = frozenset({"accepted", "refused", "conflicted"})
EXECUTOR_OUTCOMES = frozenset({"ok", "no_effect", "error"})
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# name -> (kind, help, labels); the single list of what the ledger exports.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ledger_approvals_total": (
        "Approval requests by result (accepted, vote, refused, conflicted); never by reason.",
        ("result",),
    ),
    "ledger_declines_total": (
        "Decline requests by result (the decline's status, or refused); never by reason.",
        ("result",),
    ),
    "ledger_worker_outcomes_total": ("Worker steps by outcome.", ("outcome",)),
    "ledger_recovery_examined_total": (
        "Due-work entries examined by recovery, by outcome.",
        ("outcome",),
    ),
    "ledger_projection_updates_total": ("Status views moved by the projector.", ()),
    "ledger_projection_rebuilds_total": (
        "Rebuilds run because part of the log was lost before a subscriber read it.",
        ("subscriber",),
    ),
    "ledger_webhook_deliveries_total": (
        "Webhook sends by outcome (delivered, failed); failures are retried with backoff.",
        ("outcome",),
    ),
    "ledger_housekeeping_removed_total": (
        "What housekeeping removed: expired lookups, and bodies of delivered webhook records.",
        ("kind",),
    ),
    "ledger_escalations_total": (
        "Unanswered approvals housekeeping escalated to their fallback group.",
        (),
    ),
}
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ledger_http_request_duration_seconds": (
        "HTTP request latency by method, route template and status class.",
        ("method", "route", "status"),
    ),
    "ledger_executor_call_duration_seconds": (
        "Executor call latency by capability and outcome (ok, no_effect, error).",
        ("capability", "outcome"),
    ),
}
GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ledger_attempts": ("Attempts by status, from the status views (at scrape time).", ("status",)),
    "ledger_attempts_outcome_unknown": (
        "Attempts waiting for a human in outcome_unknown (at scrape time).",
        (),
    ),
    "ledger_attempts_waiting_for_build": (
        "Queued attempts no worker with their build has taken for longer than "
        "LEDGER_WAITING_FOR_BUILD_SECONDS (at scrape time).",
        (),
    ),
    "ledger_due_work_backlog": ("Due-work entries whose time has come (at scrape time).", ()),
    "ledger_due_work_oldest_age_seconds": (
        "How late the oldest due-work entry is, 0 when none is due (at scrape time).",
        (),
    ),
    "ledger_gauges_up": ("1 when the scrape-time gauges could read the store, else 0.", ()),
    "ledger_projection_events_behind": (
        "Events written and not yet applied, by subscriber of the log.",
        ("subscriber",),
    ),
    "ledger_projection_oldest_unprocessed_age_seconds": (
        "Age of the oldest event not yet applied, by subscriber of the log.",
        ("subscriber",),
    ),
    "ledger_webhook_deliveries": (
        "Webhook delivery records by status (pending, failing), at scrape time.",
        ("status",),
    ),
}
METRIC_NAMES = (*COUNTERS, *HISTOGRAMS, *GAUGES)


def safe_label(value: str, allowed: Iterable[str] | None = None) -> str:
    """The value itself when it is in ``allowed`` (or, without a set, safe-shaped); else other."""
    if allowed is not None:
        return value if value in allowed else OTHER
    return value if _LABEL_VALUE.match(value) else OTHER


def safe_route(template: str | None) -> str:
    """A route template (``/x/{id}``), never a concrete path; unmatched -> other."""
    if template is None or not _ROUTE_VALUE.match(template):
        return OTHER
    return template


@dataclass(frozen=True)
class GaugeReading:
    """One gauge sample a source reports at scrape time."""

    name: str
    help: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


GaugeSource = Callable[[], Sequence[GaugeReading]]
Forwarder = Callable[[str, float, dict[str, str]], None]


class _SourcesCollector(Collector):
    """Asks every gauge source at scrape time; a failing source reports gauges_up 0."""

    def __init__(self) -> None:
        self.sources: list[GaugeSource] = []

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        up = 1.0
        for source in list(self.sources):
            try:
                readings = source()
            except Exception as exc:  # the store is down: say so, never fail the scrape
                logger.warning("gauge source failed: %s", type(exc).__name__)
                up = 0.0
                continue
            for reading in readings:
                label_names = [k for k, _ in reading.labels]
                family = families.get(reading.name)
                if family is None:
                    family = GaugeMetricFamily(reading.name, reading.help, labels=label_names)
                    families[reading.name] = family
                family.add_metric([safe_label(v) for _, v in reading.labels], reading.value)
        if self.sources:
            gauge = GaugeMetricFamily("ledger_gauges_up", GAUGES["ledger_gauges_up"][0])
            gauge.add_metric([], up)
            families["ledger_gauges_up"] = gauge
        yield from families.values()


class Metrics:
    """The ledger's metrics in one private registry (one per wired ledger).

    ``forward`` (set by the Lambda entry point) receives every increment and
    observation too, so the same names reach CloudWatch as EMF.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._counters = {
            name: Counter(
                name.removesuffix("_total"), help_text, list(labels), registry=self.registry
            )
            for name, (help_text, labels) in COUNTERS.items()
        }
        self._histograms = {
            name: Histogram(
                name, help_text, list(labels), buckets=LATENCY_BUCKETS, registry=self.registry
            )
            for name, (help_text, labels) in HISTOGRAMS.items()
        }
        self._sources = _SourcesCollector()
        self.registry.register(self._sources)
        self.forward: Forwarder | None = None
        self._lock = threading.Lock()

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add to a counter; label values outside the safe alphabet become ``other``."""
        safe = {k: safe_label(v) for k, v in labels.items()}
        counter = self._counters[name]
        (counter.labels(**safe) if safe else counter).inc(amount)
        self._forward(name, amount, safe)

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Record one latency (labels already bounded by the caller)."""
        safe = {k: v if k in _BOUNDED_BY_CALLER else safe_label(v) for k, v in labels.items()}
        self._histograms[name].labels(**safe).observe(seconds)
        self._forward(name, seconds, safe)

    def add_gauge_source(self, source: GaugeSource) -> None:
        """Report more gauges at scrape time (e.g. projection lag from a projection runner)."""
        with self._lock:
            self._sources.sources.append(source)

    def value(self, name: str, **labels: str) -> float:
        """The current value of one sample (0 when absent); for tests and the CLI."""
        found = self.registry.get_sample_value(name, labels)
        return 0.0 if found is None else float(found)

    def render(self) -> str:
        """The text exposition format."""
        return generate_latest(self.registry).decode()

    def _forward(self, name: str, value: float, labels: dict[str, str]) -> None:
        if self.forward is not None:
            try:
                self.forward(name, value, labels)
            except Exception as exc:  # metrics never break the work they measure
                logger.warning("metric forward failed: %s", type(exc).__name__)


def view_gauges(
    views: Any,
    store: Any,
    clock: Any,
    *,
    statuses: Sequence[str],
    cap: int = 10_000,
    waiting_for_build_seconds: float | None = None,
) -> GaugeSource:
    """Attempts by status (from the status lists), those waiting for a worker with
    their build (with ``waiting_for_build_seconds``), and the due-work backlog.

    Counting pages through each status list; ``cap`` bounds the work per scrape
    (a count at the cap means "at least").
    """
    from projections.attention import count_waiting_for_build
    from projections.status import status_list_key

    def count(list_pk: str) -> int:
        total, cursor = 0, None
        while total < cap:
            page, cursor = views.list_views(list_pk, min(500, cap - total), cursor)
            total += len(page)
            if cursor is None:
                break
        return total

    def read() -> list[GaugeReading]:
        help_by = {name: text for name, (text, _) in GAUGES.items()}
        readings = []
        for status in statuses:
            found = count(status_list_key(status))
            readings.append(
                GaugeReading(
                    "ledger_attempts", help_by["ledger_attempts"], found, (("status", status),)
                )
            )
            if status == "outcome_unknown":
                readings.append(
                    GaugeReading(
                        "ledger_attempts_outcome_unknown",
                        help_by["ledger_attempts_outcome_unknown"],
                        found,
                    )
                )
        now = clock.now()
        if waiting_for_build_seconds is not None:
            readings.append(
                GaugeReading(
                    "ledger_attempts_waiting_for_build",
                    help_by["ledger_attempts_waiting_for_build"],
                    count_waiting_for_build(views, now, waiting_for_build_seconds, cap=cap),
                )
            )
        backlog, oldest, cursor = 0, None, None
        while backlog < cap:
            page = store.due_work(now, min(500, cap - backlog), cursor)
            backlog += len(page.items)
            for item in page.items:
                if item.next_action_at is not None and (
                    oldest is None or item.next_action_at < oldest
                ):
                    oldest = item.next_action_at
            cursor = page.cursor
            if cursor is None:
                break
        age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
        readings.append(
            GaugeReading("ledger_due_work_backlog", help_by["ledger_due_work_backlog"], backlog)
        )
        readings.append(
            GaugeReading(
                "ledger_due_work_oldest_age_seconds",
                help_by["ledger_due_work_oldest_age_seconds"],
                age,
            )
        )
        return readings

    return read


def webhook_gauges(views: Any, subscribed: Callable[[], bool], *, cap: int = 10_000) -> GaugeSource:
    """Deliveries not yet acknowledged, by status, while there are subscriptions
    (a count at ``cap`` means "at least")."""
    from projections.webhooks import OUTSTANDING, delivery_list_key

    def read() -> list[GaugeReading]:
        readings: list[GaugeReading] = []
        if not subscribed():
            return readings
        for status in OUTSTANDING:
            total, cursor = 0, None
            while total < cap:
                page, cursor = views.list_views(
                    delivery_list_key(status.value), min(500, cap - total), cursor
                )
                total += len(page)
                if cursor is None:
                    break
            readings.append(
                GaugeReading(
                    "ledger_webhook_deliveries",
                    GAUGES["ledger_webhook_deliveries"][0],
                    total,
                    (("status", status.value),),
                )
            )
        return readings

    return read


def lag_gauges(read_lags: Callable[[], Any]) -> GaugeSource:
    """Each subscriber's lag (``Ledger.projection_lag()``) as gauges."""

    def read() -> list[GaugeReading]:
        readings = []
        for name, lag in sorted(read_lags().items()):
            labels = (("subscriber", name),)
            readings.append(
                GaugeReading(
                    "ledger_projection_events_behind",
                    GAUGES["ledger_projection_events_behind"][0],
                    lag.events_behind,
                    labels,
                )
            )
            readings.append(
                GaugeReading(
                    "ledger_projection_oldest_unprocessed_age_seconds",
                    GAUGES["ledger_projection_oldest_unprocessed_age_seconds"][0],
                    lag.oldest_age_seconds,
                    labels,
                )
            )
        return readings

    return read
