"""The attempt's state path drawn as SVG on the server (no JavaScript, no library).

It is drawn from the redacted audit timeline, so it can show only what the
audit shows: event types, versions, states, generations, reason codes, times.
Each event is labelled and placed on the path by the table the audit's
Mermaid diagram uses too (``projections.labels``).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from domain.attempt import AttemptStatus
from projections.labels import OBSERVATION_EVENTS, event_label, state_after

COLORS = {
    AttemptStatus.QUEUED.value: "#6b7280",
    AttemptStatus.EXECUTING.value: "#2563eb",
    AttemptStatus.SUCCEEDED.value: "#16a34a",
    AttemptStatus.FAILED_SAFE.value: "#d97706",
    AttemptStatus.OUTCOME_UNKNOWN.value: "#dc2626",
    AttemptStatus.MANUALLY_RESOLVED.value: "#7c3aed",
    AttemptStatus.EFFECT_AFTER_NO_EFFECT.value: "#be123c",
}
OBSERVED = "#9ca3af"
"""An observation (a late result): drawn on the path, changing no state."""
ROW = 46
LEFT = 30
WIDTH = 760


def timeline_svg(rows: Sequence[dict[str, Any]]) -> str:
    """An SVG document: one node per event, joined by the path the states took."""
    height = max(ROW, ROW * len(rows)) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" class="timeline">',
        "<title>State path of the attempt</title>",
    ]
    state = AttemptStatus.QUEUED.value
    for index, row in enumerate(rows):
        y = 24 + index * ROW
        state = state_after(row, state)
        observed = row["type"] in OBSERVATION_EVENTS
        color = OBSERVED if observed else COLORS.get(state, "#111827")
        shown = f"still {state}" if observed else state
        if index + 1 < len(rows):
            parts.append(
                f'<line x1="{LEFT}" y1="{y}" x2="{LEFT}" y2="{y + ROW}" '
                'stroke="#d1d5db" stroke-width="3"/>'
            )
        parts.append(
            f'<circle cx="{LEFT}" cy="{y}" r="9" fill="{color}">'
            f"<title>{escape(shown)}</title></circle>"
        )
        parts.append(
            f'<text x="{LEFT + 22}" y="{y - 3}" font-size="14" '
            f'font-family="sans-serif" fill="#111827">{escape(event_label(row))}</text>'
        )
        parts.append(
            f'<text x="{LEFT + 22}" y="{y + 14}" font-size="12" '
            f'font-family="sans-serif" fill="{color}">{escape(shown)} · '
            f"{escape(str(row.get('recorded_at', '')))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
