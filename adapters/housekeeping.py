"""Housekeeping: what keeps the store from only growing (design.md 7).

One pass, run by ``ledger serve`` (and ``ledger worker``) every
``LEDGER_RECOVERY_INTERVAL_SECONDS`` on a thread of its own, whether or not
this process executes anything:

- expired lookup items (presentation token hashes, idempotency keys, console
  sessions) are deleted, at most ``LOOKUP_BATCH`` per pass, oldest first,
  through the store's expiry index (DynamoDB deletes them itself: every
  expiring item carries the TTL attribute). Reads already treat an expired
  item as absent, so when the sweep runs changes nothing but the size;
- delivered webhook records older than ``LEDGER_WEBHOOK_RETENTION_SECONDS``
  are reduced to tombstones without their body
  (``projections.webhook_retention``), at most ``TRIM_LIMIT`` per pass;
- presented proposal versions expiring within the longest escalation lead time
  (``projections.escalation_watch``), at most ``ESCALATION_BATCH`` per pass,
  are escalated to their fallback group when a policy asks for it and its
  lead time has come (``domain.services.escalation``: once per version, however
  many processes run this pass).

A pass that did a full batch of either is followed by the next one at once
(after ``poll_seconds``), so a backlog drains without waiting a whole interval.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from adapters.bootstrap import Ledger
from domain.services.escalation import escalate_if_due
from projections.escalation_watch import due_for_escalation
from projections.webhook_retention import TRIM_LIMIT, trim_delivered

logger = logging.getLogger("ledger.housekeeping")

LOOKUP_BATCH = 500
ESCALATION_BATCH = 200


@dataclass(frozen=True)
class HousekeepingReport:
    """What one pass removed."""

    lookups: int = 0
    trimmed: int = 0
    escalated: int = 0

    @property
    def full(self) -> bool:
        """A batch was full: there may be more to do right away."""
        return self.lookups >= LOOKUP_BATCH or self.trimmed >= TRIM_LIMIT


def housekeeping_pass(ledger: Ledger) -> HousekeepingReport:
    """Sweep one batch of expired lookups, trim one batch of delivered records
    and escalate the unanswered approvals that are due."""
    now = ledger.clock.now()
    lookups = ledger.store.sweep_lookups(now, LOOKUP_BATCH)
    trimmed = trim_delivered(ledger.views, now, ledger.settings.webhook_retention_seconds)
    escalated = escalation_pass(ledger)
    if lookups:
        ledger.metrics.inc("ledger_housekeeping_removed_total", lookups, kind="lookup")
    if trimmed:
        ledger.metrics.inc("ledger_housekeeping_removed_total", trimmed, kind="webhook_body")
    return HousekeepingReport(lookups=lookups, trimmed=trimmed, escalated=escalated)


def escalation_pass(ledger: Ledger) -> int:
    """Escalate the unanswered approvals that are due, at most ``ESCALATION_BATCH``
    (one read of the escalation watch, then each proposal decided on a
    consistent read); how many escalated. Also run by the deployed worker's
    recovery tick (``adapters.aws_lambda.worker``)."""
    now = ledger.clock.now()
    escalated = sum(
        escalate_if_due(ledger.context, proposal_id)
        for proposal_id in due_for_escalation(ledger.views, now, ESCALATION_BATCH)
    )
    if escalated:
        ledger.metrics.inc("ledger_escalations_total", escalated)
    return escalated


def housekeeping_loop(
    ledger: Ledger, stop: threading.Event, interval: float, poll_seconds: float = 0.2
) -> None:
    """Passes until ``stop`` is set; a failed pass (the store unavailable) is
    logged by its class and tried again at the next interval."""
    while not stop.is_set():
        wait = interval
        try:
            report = housekeeping_pass(ledger)
            if report.lookups or report.trimmed or report.escalated:
                logger.info(
                    "housekeeping removed lookups=%d trimmed_webhook_records=%d escalated=%d",
                    report.lookups,
                    report.trimmed,
                    report.escalated,
                )
            if report.full:
                wait = poll_seconds
        except Exception as exc:
            logger.error("housekeeping pass failed: %s", type(exc).__name__)
        stop.wait(wait)
