"""The API Lambda: the FastAPI app behind an HTTP API, through Mangum.

It lives under ``api/`` because it imports the app factory, and adapters may
not import ``api`` (import-linter contract). The app and its ledger are built
on the first invocation (cold start), from the same validated settings as the
other functions; nothing happens at import time.
"""

from __future__ import annotations

import threading
from typing import Any

from mangum import Mangum

from adapters.aws_lambda.common import get_ledger, set_ledger_for_tests
from api.http.app import create_app

__all__ = ["handler", "reset_for_tests", "set_ledger_for_tests"]

_lock = threading.Lock()
_adapter: Mangum | None = None


def get_adapter() -> Mangum:
    """The Mangum adapter around the app, built once per execution environment."""
    global _adapter
    with _lock:
        if _adapter is None:
            ledger = get_ledger()
            # lifespan off: the ledger lives as long as the execution environment.
            _adapter = Mangum(create_app(ledger.settings, ledger=ledger), lifespan="off")
        return _adapter


def reset_for_tests() -> None:
    """Forget the built app (and the injected ledger)."""
    global _adapter
    with _lock:
        _adapter = None
    set_ledger_for_tests(None)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Entry point for API Gateway HTTP API (payload format 2.0) events."""
    response: dict[str, Any] = get_adapter()(event, context)
    return response
