"""Fault injection and request counting around a real boto3 DynamoDB client.

Behaviour is proven against the emulator; these wrappers only decide when a
real request is sent and what the caller sees afterwards (a lost response,
throttling), which the emulator cannot be told to do.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

Method = Callable[..., Any]
Fault = Callable[[Method, dict[str, Any]], Any]


def client_error(code: str, operation: str, status: int = 400, **extra: Any) -> ClientError:
    """A ``ClientError`` as botocore raises it for ``code``."""
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": f"injected {code}"},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, operation)


def lost_response(method: Method, kwargs: dict[str, Any]) -> Any:
    """The request reaches DynamoDB and is applied; the response never arrives."""
    method(**kwargs)
    raise ReadTimeoutError(endpoint_url="http://dynamodb.invalid")


def not_sent(exc: BaseException) -> Fault:
    """Fail before anything is sent."""

    def fault(method: Method, kwargs: dict[str, Any]) -> Any:
        raise exc

    return fault


def throttled(operation: str, code: str = "ThrottlingException") -> Fault:
    return not_sent(client_error(code, operation))


def before(action: Callable[[], Any], then: Fault | None = None) -> Fault:
    """Run ``action`` (say, a competing write) first, then the fault or the call."""

    def fault(method: Method, kwargs: dict[str, Any]) -> Any:
        action()
        return then(method, kwargs) if then else method(**kwargs)

    return fault


class FaultyClient:
    """Delegates to a real client; each listed operation plays its faults in order,
    then behaves normally. Every call is recorded (operation, kwargs)."""

    def __init__(self, real: Any, **faults: list[Fault]) -> None:
        self._real = real
        self._faults = {name: list(items) for name, items in faults.items()}
        self._lock = threading.Lock()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if not callable(method) or name.startswith("_") or name == "close":
            return method

        def call(**kwargs: Any) -> Any:
            with self._lock:
                self.calls.append((name, kwargs))
                queue = self._faults.get(name)
                fault = queue.pop(0) if queue else None
            if fault is None:
                return method(**kwargs)
            return fault(method, kwargs)

        return call

    def count(self, operation: str) -> int:
        return sum(1 for name, _ in self.calls if name == operation)

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
