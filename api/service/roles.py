"""The roles a caller may hold, and a minted token's default lifetime.

Apart from ``principal`` because the ``ledger`` command names them in its
options: its ``--help`` imports this module, and nothing of the services."""

from __future__ import annotations

from enum import StrEnum

DEFAULT_TTL_SECONDS = 3600
"""A minted token's lifetime unless told (``ledger token --ttl``)."""


class Role(StrEnum):
    """What a caller may do (the ``role`` claim of a bearer token)."""

    ACTOR = "actor"
    CHANNEL = "channel"
    PROPOSER = "proposer"
    ADMIN = "admin"
    METRICS = "metrics"  # a scraper: reads /metrics and nothing else
