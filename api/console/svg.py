"""The attempt's state path drawn as SVG on the server (no JavaScript, no library).

It is drawn from the redacted audit timeline, so it can show only what the
audit shows: event types, versions, states, generations, reason codes, times.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from projections.audit import STATE_BY_TYPE

COLORS = {
    "queued": "#6b7280",
    "executing": "#2563eb",
    "succeeded": "#16a34a",
    "failed_safe": "#d97706",
    "outcome_unknown": "#dc2626",
    "manually_resolved": "#7c3aed",
    "observed": "#9ca3af",
}
ROW = 46
LEFT = 30
WIDTH = 760


def _state_of(row: dict[str, Any], previous: str) -> str:
    kind = str(row["type"])
    if kind == "ResultRecorded":
        return str(row["data"].get("status", previous))
    if kind == "LateResultObserved":
        return "observed"
    return STATE_BY_TYPE.get(kind, previous)


def _label(row: dict[str, Any]) -> str:
    kind = str(row["type"])
    data = row["data"]
    text = f"v{row['version']} {kind}"
    if kind == "Leased" and data.get("generation") is not None:
        text += f" (generation {data['generation']})"
    reason = data.get("reason_code") or data.get("reason")
    if kind in ("ResultRecorded", "Requeued") and reason:
        text += f" ({reason})"
    if kind == "ManuallyResolved" and data.get("outcome"):
        text += f" ({data['outcome']})"
    return text


def timeline_svg(rows: Sequence[dict[str, Any]]) -> str:
    """An SVG document: one node per event, joined by the path the states took."""
    height = max(ROW, ROW * len(rows)) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" class="timeline">',
        "<title>State path of the attempt</title>",
    ]
    state = "queued"
    for index, row in enumerate(rows):
        y = 24 + index * ROW
        state = _state_of(row, state)
        color = COLORS.get(state, "#111827")
        if index + 1 < len(rows):
            parts.append(
                f'<line x1="{LEFT}" y1="{y}" x2="{LEFT}" y2="{y + ROW}" '
                'stroke="#d1d5db" stroke-width="3"/>'
            )
        parts.append(
            f'<circle cx="{LEFT}" cy="{y}" r="9" fill="{color}">'
            f"<title>{escape(state)}</title></circle>"
        )
        parts.append(
            f'<text x="{LEFT + 22}" y="{y - 3}" font-size="14" '
            f'font-family="sans-serif" fill="#111827">{escape(_label(row))}</text>'
        )
        parts.append(
            f'<text x="{LEFT + 22}" y="{y + 14}" font-size="12" '
            f'font-family="sans-serif" fill="{color}">{escape(state)} · '
            f"{escape(str(row.get('recorded_at', '')))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
