"""Time helpers shared by the aggregates (UTC, RFC 3339 with ``Z``)."""

from __future__ import annotations

from datetime import datetime

from domain.spec import format_utc, parse_utc

__all__ = ["format_utc", "is_past", "parse_utc"]


def is_past(deadline_text: str, now: datetime) -> bool:
    """True when ``now`` is at or after the stored deadline."""
    return now >= parse_utc(deadline_text)
