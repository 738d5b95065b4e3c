"""When the watch of a "no effect" settlement looks again, by default (I12).

Apart from ``context`` (which uses it) so that the settings can name it
without importing the ports and services: every ``ledger`` command that reads
its settings imports them."""

from __future__ import annotations

DEFAULT_NO_EFFECT_WATCH = (60, 600, 3600, 86400)  # 1 min, 10 min, 1 h, 24 h
