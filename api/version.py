"""The ledger's version: the installed distribution's metadata, whose one source
is ``version`` in ``pyproject.toml``. ``ledger --version`` and the OpenAPI
document both print it."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "execution-ledger"
UNKNOWN = "0+unknown"


@cache
def package_version() -> str:
    """The installed version, or ``0+unknown`` for sources that were never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN
