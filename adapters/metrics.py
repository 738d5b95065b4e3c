"""In-process counters in the Prometheus text format (served at ``/metrics``).

Labels carry only bounded, redacted values (outcomes, reason codes, roles):
never ids, tokens or content (I10).
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict

_LABEL_VALUE = re.compile(r"^[a-z0-9_.\-]{1,64}$")

HELP = {
    "ledger_approvals_total": "Approval requests by result and redacted reason code.",
    "ledger_declines_total": "Decline requests by result and redacted reason code.",
    "ledger_worker_outcomes_total": "Worker steps by outcome.",
    "ledger_recovery_examined_total": "Due-work entries examined by recovery, by outcome.",
    "ledger_projection_updates_total": "Status views moved by the projector.",
}


class Metrics:
    """Thread-safe monotonically increasing counters."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self._lock = threading.Lock()

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        safe = tuple(sorted((k, v if _LABEL_VALUE.match(v) else "other")
                            for k, v in labels.items()))
        with self._lock:
            self._values[(name, safe)] += amount

    def value(self, name: str, **labels: str) -> float:
        with self._lock:
            return self._values.get((name, tuple(sorted(labels.items()))), 0.0)

    def render(self) -> str:
        with self._lock:
            items = sorted(self._values.items())
        lines: list[str] = []
        seen: set[str] = set()
        for (name, labels), value in items:
            if name not in seen:
                seen.add(name)
                lines.append(f"# HELP {name} {HELP.get(name, name)}")
                lines.append(f"# TYPE {name} counter")
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{label_text}}} {value:g}" if label_text else f"{name} {value:g}")
        return "\n".join(lines) + "\n"
