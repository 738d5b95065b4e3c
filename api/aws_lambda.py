"""The API Lambda: the FastAPI app behind an HTTP API, through Mangum.

It lives under ``api/`` because it imports the app factory, and adapters may
not import ``api`` (import-linter contract). The app and its ledger are built
on the first invocation (cold start), from the same validated settings as the
other functions; nothing happens at import time.
"""

from __future__ import annotations

from typing import Any

from mangum import Mangum

from adapters.aws_lambda.common import BuiltOnce, get_ledger
from api.http.app import create_app

__all__ = ["handler"]


def app_from_environment() -> Mangum:
    """The Mangum adapter around the app, on the execution environment's ledger."""
    ledger = get_ledger()
    # lifespan off: the ledger lives as long as the execution environment.
    return Mangum(create_app(ledger.settings, ledger=ledger), lifespan="off")


environment_app: BuiltOnce[Mangum] = BuiltOnce(app_from_environment)
"""The app of this execution environment, built on the first invocation."""


def get_adapter() -> Mangum:
    """The Mangum adapter around the app, built once per execution environment."""
    return environment_app.get()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Entry point for API Gateway HTTP API (payload format 2.0) events."""
    response: dict[str, Any] = get_adapter()(event, context)
    return response
