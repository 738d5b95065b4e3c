"""pytest plugin: the reference provider as a real process on a free loopback port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.ministack import REPO_ROOT, free_port

PROVIDER_TOKEN_ENV = "LEDGER_TEST_PROVIDER_TOKEN"


@dataclass
class Provider:
    """A running reference provider: its base URL, token and counters."""

    url: str
    pid: int
    token: str

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return json.loads(answer.read())

    def effects(self) -> dict[str, int]:
        """Effects applied per idempotency key (the provider's own counter)."""
        found: dict[str, int] = self._get("/_effects")["effects"]
        return found

    def requests(self) -> dict[str, int]:
        found: dict[str, int] = self._get("/_effects")["requests"]
        return found

    def unauthorized(self) -> dict[str, int]:
        """Writes refused for their credential (401), per idempotency key."""
        found: dict[str, int] = self._get("/_effects")["unauthorized"]
        return found

    def wait_idle(self, key: str, seconds: float = 30) -> None:
        """Wait until no request with ``key`` is still being answered (a late answer)."""
        deadline = time.monotonic() + seconds
        while key in self._get("/_effects")["in_flight"]:
            if time.monotonic() > deadline:
                raise AssertionError("the provider is still answering")
            time.sleep(0.05)

    def held(self, hold: str) -> int:
        """How many answers wait for ``hold`` now (the ``held_answer`` fault)."""
        found: int = self._get("/_effects")["held"].get(hold, 0)
        return found

    def release(self, hold: str) -> None:
        """Let every answer held for ``hold`` go, and hold no later one."""
        request = urllib.request.Request(
            self.url + "/_release",
            data=json.dumps({"hold": hold}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def lookups(self) -> int:
        found: int = self._get("/_effects")["lookups"]
        return found


def start_provider(token: str, port: int | None = None) -> tuple[subprocess.Popen[bytes], Provider]:
    """Start ``python -m tests.support.provider`` and wait until it answers."""
    port = port or free_port()
    env = {**os.environ, PROVIDER_TOKEN_ENV: token}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.provider",
            "--port",
            str(port),
            "--token-env",
            PROVIDER_TOKEN_ENV,
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    provider = Provider(f"http://127.0.0.1:{port}", process.pid, token)
    deadline = time.monotonic() + 20
    while True:
        try:
            provider._get("/_health")
            return process, provider
        except (urllib.error.URLError, ConnectionError, OSError):
            if process.poll() is not None or time.monotonic() > deadline:
                stop_provider(process)
                raise RuntimeError("the reference provider did not start") from None
            time.sleep(0.05)


def stop_provider(process: subprocess.Popen[bytes]) -> None:
    """Stop the provider we started, by its pid."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def provider() -> Iterator[Provider]:
    """One reference provider per test session (per xdist worker)."""
    process, running = start_provider("provider-test-token-" + os.urandom(8).hex())
    try:
        yield running
    finally:
        stop_provider(process)
