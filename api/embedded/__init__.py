"""The execution ledger inside a Python application: ``from api.embedded import open_ledger``.

    with open_ledger(store="sqlite", path="var/ledger.db") as ledger:
        proposal = ledger.propose("alice", spec)
        ...

Every method calls the same service functions as the HTTP API (``api.service``),
with the same request schemas, answers (the HTTP API's response models) and
errors (``domain.errors``: each has the ``code`` the HTTP API would return).
The README's "Embed it" section is the tour; ``api.testing`` gives a ledger
for tests with a clock they move.
"""

from __future__ import annotations

import os
from typing import Any

from adapters.bootstrap import build_ledger
from adapters.settings import Settings, load_settings
from api.embedded.ledger import DEFAULT_SUBJECT, EmbeddedLedger
from api.service.principal import Principal, Role
from domain.errors import LedgerError
from domain.ports import Clock, TokenSource
from domain.services.approval import Provenance

__all__ = [
    "EmbeddedLedger",
    "LedgerError",
    "Principal",
    "Provenance",
    "Role",
    "open_ledger",
]


def open_ledger(
    settings: Settings | None = None,
    *,
    store: str | None = None,
    path: str | os.PathLike[str] | None = None,
    table: str | None = None,
    start: bool = True,
    subject: str = DEFAULT_SUBJECT,
    clock: Clock | None = None,
    tokens: TokenSource | None = None,
    **overrides: Any,
) -> EmbeddedLedger:
    """Open a ledger in this process.

    Without ``settings`` they are read from the environment (the ``LEDGER_*``
    variables of ``ledger serve``); ``store`` (``memory``, ``sqlite`` or
    ``dynamodb``), ``path`` (the SQLite file), ``table`` (the DynamoDB table)
    and any other setting by its field name (``lease_seconds=30``) override
    them. Invalid settings raise ``SettingsError`` with one line naming them.

    ``with open_ledger(...) as ledger:`` starts the worker, recovery and
    subscriber loops on enter (``start=False``: they are not started; call
    ``ledger.start()`` or run them elsewhere) and stops them and closes the
    store on exit. ``subject`` is who the calls are recorded as (resolutions,
    idempotency scopes); ``clock`` and ``tokens`` replace the system ones.
    """
    if store is not None:
        overrides["store"] = store
    if path is not None:
        overrides["sqlite_path"] = os.fspath(path)
    if table is not None:
        overrides["dynamodb_table"] = table
    if settings is None:
        settings = load_settings(**overrides)
    elif overrides:
        settings = load_settings(**{**settings.model_dump(), **overrides})
    wiring = build_ledger(settings, clock=clock, tokens=tokens)
    return EmbeddedLedger(wiring, subject=subject, start=start)
