"""The HTTP and CLI tests: every one runs without the outer LEDGER_* variables.
The app fixtures (settings, ledger, client, bearer, admin, directory) live in
tests/support/app_fixtures.py."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _hermetic_env(hermetic_env: None) -> None:
    """No LEDGER_* variable from the outer environment leaks into these tests."""
