"""Timed phases with progress lines, and bounded waits."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class Phases:
    """Named, timed phases; every line says how long the run has taken so far."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.timings: list[tuple[str, float]] = []

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {message}", flush=True)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.say(f"== {name}")
        begun = time.monotonic()
        try:
            yield
        finally:
            self.timings.append((name, time.monotonic() - begun))

    def report(self) -> str:
        lines = ["phase timings:"]
        lines += [f"  {seconds:6.1f} s  {name}" for name, seconds in self.timings]
        lines.append(f"  {time.monotonic() - self.started:6.1f} s  total")
        return "\n".join(lines)


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    seconds: float,
    say: Callable[[str], None],
    every: float = 0.25,
) -> T:
    """Poll ``probe`` until it returns something; fail naming ``what`` at the deadline.

    Nothing is retried: ``probe`` only looks, and an exception from it ends the wait.
    """
    begun = time.monotonic()
    deadline = begun + seconds
    next_note = begun + 10
    while True:
        found = probe()
        if found is not None:
            say(f"   {what}: after {time.monotonic() - begun:.1f} s")
            return found
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f"gave up after {seconds:.0f} s waiting for {what}")
        if now > next_note:
            say(f"   still waiting for {what} ({deadline - now:.0f} s left)")
            next_note = now + 10
        time.sleep(every)
