"""A webhook receiver in process: keeps every request's headers and body."""

from __future__ import annotations

from typing import Any


class CapturingTransport:
    """The webhook receiver: keeps every request's headers and body, answers 204."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []

    def post(self, url: str, headers: Any, body: bytes, timeout: float) -> int:
        self.requests.append((dict(headers), body))
        return 204
