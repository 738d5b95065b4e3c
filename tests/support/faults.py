"""Fault injection and request counting around a real boto3 DynamoDB client.

Behaviour is proven against the emulator; these wrappers only decide when a
real request is sent and what the caller sees afterwards (a lost response,
throttling), which the emulator cannot be told to do. One scripted client
(:class:`ScriptedFaultClient`) plays faults a test chose; one random client
(:class:`RandomFaultClient`) draws them from a seed, so a schedule replays.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

Method = Callable[..., Any]
Fault = Callable[[Method, dict[str, Any]], Any]

WRITE_OPERATIONS = frozenset({"put_item", "transact_write_items", "delete_item", "update_item"})
READ_OPERATIONS = frozenset({"get_item", "query", "batch_get_item"})
NOT_SENT = "not_sent"
LOST_RESPONSE = "lost_response"


def client_error(code: str, operation: str, status: int = 400, **extra: Any) -> ClientError:
    """A ``ClientError`` as botocore raises it for ``code``."""
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": f"injected {code}"},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, operation)


def not_sent_error() -> EndpointConnectionError:
    return EndpointConnectionError(endpoint_url="http://dynamodb.invalid")


def lost_response_error() -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url="http://dynamodb.invalid")


def lost_response(method: Method, kwargs: dict[str, Any]) -> Any:
    """The request reaches DynamoDB and is applied; the response never arrives."""
    method(**kwargs)
    raise lost_response_error()


def not_sent(exc: BaseException | None = None) -> Fault:
    """Fail before anything is sent (with ``exc``, or a connection error)."""

    def fault(method: Method, kwargs: dict[str, Any]) -> Any:
        raise exc if exc is not None else not_sent_error()

    return fault


def throttled(operation: str, code: str = "ThrottlingException") -> Fault:
    return not_sent(client_error(code, operation))


def before(action: Callable[[], Any], then: Fault | None = None) -> Fault:
    """Run ``action`` (say, a competing write) first, then the fault or the call."""

    def fault(method: Method, kwargs: dict[str, Any]) -> Any:
        action()
        return then(method, kwargs) if then else method(**kwargs)

    return fault


FAULTS_BY_KIND: dict[str, Fault] = {NOT_SENT: not_sent(), LOST_RESPONSE: lost_response}


def _always(_: dict[str, Any]) -> bool:
    return True


class ScriptedFaultClient:
    """Delegates to a real client; plays the faults a test scripted, then behaves normally.

    Script per operation at construction: ``ScriptedFaultClient(real,
    put_item=[lost_response, ...])`` plays those faults, in order, on the next
    ``put_item`` calls. Or arm later: ``arm(kind, operation, count=, when=)``
    makes the next ``count`` requests of ``operation`` (any write when None)
    for which ``when(kwargs)`` holds fail with ``kind`` (``NOT_SENT``,
    ``LOST_RESPONSE`` or a fault function). Every call is recorded in
    ``calls`` as (operation, kwargs); every injected fault is counted in
    ``injected`` per (operation, kind).
    """

    def __init__(self, real: Any, **faults: list[Fault]) -> None:
        self._real = real
        self._lock = threading.Lock()
        self._armed: list[tuple[str | Fault, str | None, Callable[[dict[str, Any]], bool]]] = [
            (fault, operation, _always) for operation, items in faults.items() for fault in items
        ]
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.injected: Counter[tuple[str, str]] = Counter()

    def arm(
        self,
        kind: str | Fault,
        operation: str | None = None,
        *,
        count: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        with self._lock:
            for _ in range(count):
                self._armed.append((kind, operation, when or _always))

    @property
    def pending(self) -> int:
        """Armed faults not played yet."""
        with self._lock:
            return len(self._armed)

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def count(self, operation: str) -> int:
        """How many calls of ``operation`` the client saw (faulted or not)."""
        with self._lock:
            return sum(1 for name, _ in self.calls if name == operation)

    def _take(self, name: str, kwargs: dict[str, Any]) -> Fault | None:
        with self._lock:
            self.calls.append((name, kwargs))
            for index, (kind, operation, when) in enumerate(self._armed):
                matches = name == operation if operation else name in WRITE_OPERATIONS
                if matches and when(kwargs):
                    del self._armed[index]
                    if isinstance(kind, str):
                        self.injected[(name, kind)] += 1
                        return FAULTS_BY_KIND[kind]
                    self.injected[(name, getattr(kind, "__name__", "fault"))] += 1
                    return kind
        return None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if not callable(method) or name.startswith("_") or name == "close":
            return method

        def call(**kwargs: Any) -> Any:
            fault = self._take(name, kwargs)
            return method(**kwargs) if fault is None else fault(method, kwargs)

        return call

    def close(self) -> None:
        """The wrapped client belongs to someone else."""


class RandomFaultClient:
    """Delegates to a real client; draws a fault for some requests from a seed.

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
            return method(**kwargs) if kind is None else FAULTS_BY_KIND[kind](method, kwargs)

        return call

    def close(self) -> None:
        """The wrapped client belongs to someone else."""


class RequestCounter:
    """Counts the HTTP requests a client sends, per operation (botocore event hook)."""

    def __init__(self, client: Any) -> None:
        self.by_operation: Counter[str] = Counter()
        self._lock = threading.Lock()
        client.meta.events.register("before-send.dynamodb", self._count)

    def _count(self, event_name: str = "", **kwargs: Any) -> None:
        with self._lock:
            self.by_operation[event_name.rsplit(".", 1)[-1]] += 1

    @property
    def total(self) -> int:
        return sum(self.by_operation.values())

    def reset(self) -> None:
        with self._lock:
            self.by_operation.clear()


@contextmanager
def recorder_reads(recorder: Any) -> Iterator[Counter[str]]:
    """Count the recorder's reads (one SELECT each on SQLite) while the block runs.

    Batched reads count as the reads they take: read slot by slot or stream by
    stream (the defaults), each ``select_events``; read in batches (SQLite: one
    SELECT per hundred), one ``select_events_at`` / ``select_latest_events`` per
    batch."""
    counts: Counter[str] = Counter()
    names = ("select_events", "get_lookup")
    batched = ("select_events_at", "select_latest_events")
    originals = {name: getattr(recorder, name) for name in (*names, *batched)}

    def counted(name: str) -> Any:
        def read(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return originals[name](*args, **kwargs)

        return read

    def batch(name: str) -> Any:
        def read(keys: Any) -> Any:
            before = counts["select_events"]
            found = originals[name](keys)
            if counts["select_events"] == before:  # not one by one: one read per hundred
                counts[name] += -(-len(set(keys)) // 100)
            return found

        return read

    for name in names:
        setattr(recorder, name, counted(name))
    for name in batched:
        setattr(recorder, name, batch(name))
    try:
        yield counts
    finally:
        for name in (*names, *batched):
            delattr(recorder, name)
