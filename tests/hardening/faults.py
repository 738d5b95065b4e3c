"""Seeded, randomized fault injection around a real boto3 DynamoDB client.

``tests/support/faults.py`` plays scripted faults; this wrapper draws them:
each request may fail before it is sent (nothing reaches DynamoDB) or be
applied and then lose its response (a timeout after the write happened), the
two shapes of an ambiguous request. Draws come from a seeded generator, so a
failing schedule replays exactly.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

WRITE_OPERATIONS = frozenset({"put_item", "transact_write_items", "delete_item", "update_item"})
READ_OPERATIONS = frozenset({"get_item", "query", "batch_get_item"})
NOT_SENT = "not_sent"
LOST_RESPONSE = "lost_response"


def not_sent_error() -> EndpointConnectionError:
    return EndpointConnectionError(endpoint_url="http://dynamodb.invalid")


def lost_response_error() -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url="http://dynamodb.invalid")


class RandomFaultClient:
    """Delegates to a real client; draws a fault for some requests.

    ``write_rate`` applies to writes (half not sent, half applied with the
    response lost), ``read_rate`` to reads (not sent only: a read has nothing
    to apply). ``armed`` switches injection off and on (set-up and the final
    drain run clean). Every injected fault is counted per (operation, kind).
    """

    def __init__(
        self,
        real: Any,
        *,
        seed: int,
        write_rate: float = 0.1,
        read_rate: float = 0.02,
        operations: Collection[str] | None = None,
    ) -> None:
        self._real = real
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.write_rate = write_rate
        self.read_rate = read_rate
        self.operations = frozenset(operations) if operations is not None else None
        self.armed = True
        self.injected: Counter[tuple[str, str]] = Counter()

    def _draw(self, name: str) -> str | None:
        if not self.armed or (self.operations is not None and name not in self.operations):
            return None
        with self._lock:
            roll = self._rng.random()
            if name in WRITE_OPERATIONS and roll < self.write_rate:
                kind = NOT_SENT if self._rng.random() < 0.5 else LOST_RESPONSE
            elif name in READ_OPERATIONS and roll < self.read_rate:
                kind = NOT_SENT
            else:
                return None
            self.injected[(name, kind)] += 1
            return kind

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if not callable(method) or name.startswith("_") or name == "close":
            return method

        def call(**kwargs: Any) -> Any:
            kind = self._draw(name)
            if kind == NOT_SENT:
                raise not_sent_error()
            result = method(**kwargs)
            if kind == LOST_RESPONSE:
                raise lost_response_error()
            return result

        return call

    def close(self) -> None:
        """The wrapped client belongs to someone else."""


class ScriptedFaultClient:
    """Delegates to a real client; the next matching request gets the armed fault.

    ``arm(kind, operation, count, when)`` makes the next ``count`` requests of
    ``operation`` (any write when None) for which ``when(kwargs)`` holds fail
    with ``kind``. Used to aim one ambiguous request at one write path.
    """

    def __init__(self, real: Any) -> None:
        self._real = real
        self._lock = threading.Lock()
        self._armed: list[tuple[str, str | None, Callable[[dict[str, Any]], bool]]] = []
        self.injected: Counter[tuple[str, str]] = Counter()
        self.calls: Counter[str] = Counter()

    def arm(
        self,
        kind: str,
        operation: str | None = None,
        *,
        count: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        with self._lock:
            for _ in range(count):
                self._armed.append((kind, operation, when or (lambda _: True)))

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._armed)

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def _take(self, name: str, kwargs: dict[str, Any]) -> str | None:
        with self._lock:
            self.calls[name] += 1
            for index, (kind, operation, when) in enumerate(self._armed):
                matches = name == operation if operation else name in WRITE_OPERATIONS
                if matches and when(kwargs):
                    del self._armed[index]
                    self.injected[(name, kind)] += 1
                    return kind
        return None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if not callable(method) or name.startswith("_") or name == "close":
            return method

        def call(**kwargs: Any) -> Any:
            kind = self._take(name, kwargs)
            if kind == NOT_SENT:
                raise not_sent_error()
            result = method(**kwargs)
            if kind == LOST_RESPONSE:
                raise lost_response_error()
            return result

        return call

    def close(self) -> None:
        """The wrapped client belongs to someone else."""
