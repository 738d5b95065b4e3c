"""Where a webhook delivery stands (``projections.webhooks`` keeps the records).

Apart from ``webhooks`` because ``ledger webhooks list --status`` names the
statuses in its options: its ``--help`` imports this module, and no store."""

from __future__ import annotations

from enum import StrEnum


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILING = "failing"
