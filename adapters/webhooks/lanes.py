"""The webhook deliveries of ``ledger serve``: one lane (thread) per subscription.

A lane sweeps its subscription's expiry watches and runs the deliverer's pass
for that subscription only, so a receiver that hangs until its timeout holds
its own lane and no other. An idle lane looks again every second, or as soon
as its notifier has written new delivery records (``wake``). One more thread
moves records written before the due lists into them, once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from functools import partial

from adapters.webhooks.deliverer import Deliverer
from projections.webhooks import WebhookNotifier

logger = logging.getLogger("ledger.runtime")
IDLE_SECONDS = 1.0


class DeliveryLanes:
    """The lanes of every subscription the deliverer knows, stopped by ``stop_event``."""

    def __init__(
        self,
        deliverer: Deliverer,
        notifiers: Sequence[WebhookNotifier],
        stop_event: threading.Event,
        *,
        poll_seconds: float = 0.2,
    ) -> None:
        self.deliverer = deliverer
        self.notifiers = list(notifiers)
        self.stop_event = stop_event
        self.idle_seconds = max(poll_seconds, IDLE_SECONDS)
        self.poll_seconds = poll_seconds
        self.wakes = {f"webhook-{s}": threading.Event() for s in deliverer.subscriptions}

    def start(self, spawn: Callable[[str, Callable[[], None]], object]) -> None:
        spawn("ledger-webhooks-adopt", self._adopt)
        for subscription_id in self.deliverer.subscriptions:
            spawn(f"ledger-webhooks-{subscription_id}", partial(self._lane, subscription_id))

    def wake(self, subscriber_name: str) -> None:
        """The subscriber ``webhook-<id>`` wrote records: its lane sends them now."""
        wake = self.wakes.get(subscriber_name)
        if wake is not None:
            wake.set()

    def release(self) -> None:
        """After ``stop_event`` is set: no lane waits out its idle second."""
        for wake in self.wakes.values():
            wake.set()

    def _adopt(self) -> None:
        while not self.stop_event.is_set():
            try:
                moved = self.deliverer.adopt_legacy()
                if moved:
                    logger.info("webhook deliveries moved to the due lists: %d", moved)
                return
            except Exception as exc:  # the store was unavailable: try again later
                logger.error("webhook delivery adoption failed: %s", type(exc).__name__)
                self.stop_event.wait(self.idle_seconds)

    def _lane(self, subscription_id: str) -> None:
        wake = self.wakes[f"webhook-{subscription_id}"]
        notifiers = [n for n in self.notifiers if n.subscription_id == subscription_id]
        while not self.stop_event.is_set():
            wake.clear()
            try:
                for notifier in notifiers:
                    notifier.sweep_expired()  # proposal.expired comes from the clock
                if not self.deliverer.run_lane(subscription_id, stop=self.stop_event.is_set):
                    # Nothing was due: wait for the notifier's next records, or a
                    # second (a backoff that ends, another process's records).
                    wake.wait(self.idle_seconds)
            except Exception as exc:  # the store was unavailable: try again later
                logger.error(
                    "webhook delivery pass failed (%s): %s", subscription_id, type(exc).__name__
                )
                self.stop_event.wait(self.poll_seconds)
