"""The http executor against the reference provider (a real process on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.executors.http import HttpExecutor
from adapters.system import SystemClock
from tests.support.http_executors import HTTP_MODES, Build, executors_toml, load_http
from tests.support.provider_fixtures import Provider


@pytest.fixture
def http_executor(tmp_path: Path, provider: Provider) -> Iterator[Build]:
    """Build one http executor (by delivery mode) from an executors file."""
    opened: list[Any] = []

    def build(mode: str = "provider_idempotency", **toml: Any) -> HttpExecutor:
        loaded = load_http(
            tmp_path, executors_toml(provider.url, **toml), provider.token, clock=SystemClock()
        )
        opened.append(loaded.registry)
        entry = next(e for e in loaded.registry.entries() if e.capability == HTTP_MODES[mode])
        found = loaded.registry.get(entry.capability, entry.build_digest)
        assert isinstance(found, HttpExecutor)
        return found

    yield build
    for registry in opened:
        registry.close()
