"""The boto3 client the DynamoDB backend uses, and how it retries.

botocore's own retries are switched off (``total_max_attempts=1``): every
retry goes through :class:`Retrier`, which knows which calls are safe to
resend (a transaction carries a ``ClientRequestToken``; a conditional
``PutItem`` is checked against what we wrote) and backs off on throttling
with an injectable sleep, so tests never sleep.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError
from eventsourcing.persistence import OperationalError, ProgrammingError

if TYPE_CHECKING:  # the stubs are a dev extra (mypy); at run time the names are Any
    from boto3.session import Session
    from mypy_boto3_dynamodb.client import DynamoDBClient as DynamoDBClient
    from mypy_boto3_dynamodbstreams.client import (
        DynamoDBStreamsClient as DynamoDBStreamsClient,
    )
else:
    DynamoDBClient = Any
    DynamoDBStreamsClient = Any

T = TypeVar("T")

THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        # Another request with the same ClientRequestToken is still running.
        "TransactionInProgressException",
    }
)
SERVER_ERROR_CODES = frozenset(
    {"InternalServerError", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException"}
)


class DynamoDBUnavailableError(OperationalError):
    """DynamoDB did not answer usefully within the retry budget; the store maps
    it to ``StoreUnavailable``. A transaction is all-or-nothing, so nothing is
    half-written."""


class DynamoDBRequestError(ProgrammingError):
    """DynamoDB rejected a request as invalid (validation, missing table, ...)."""


def client_config(**overrides: Any) -> Config:
    """The botocore config for ledger clients: no hidden retries, bounded timeouts."""
    options: dict[str, Any] = {
        "retries": {"total_max_attempts": 1, "mode": "standard"},
        "connect_timeout": 3,
        "read_timeout": 10,
        "max_pool_connections": 50,
    }
    options.update(overrides)
    return Config(**options)


def make_client(*, session: Session | None = None, **kwargs: Any) -> DynamoDBClient:
    """A DynamoDB client with :func:`client_config`.

    The endpoint comes from boto3's own ``AWS_ENDPOINT_URL_DYNAMODB`` (or an
    explicit ``endpoint_url``), so real AWS needs no code change. Pass a
    ``boto3.session.Session`` to build many clients cheaply (not concurrently:
    sessions are not thread-safe, the clients they make are).
    """
    import boto3

    config = kwargs.pop("config", None) or client_config()
    session = session or boto3.session.Session()
    return session.client("dynamodb", config=config, **kwargs)


def error_code(exc: BaseException) -> str:
    """The DynamoDB error code of a ``ClientError`` ('' for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def is_throttling(exc: BaseException) -> bool:
    """True for errors that mean 'slow down and send the same request again'."""
    return error_code(exc) in THROTTLING_CODES


def is_transient(exc: BaseException) -> bool:
    """True for errors after which the request may or may not have been applied:
    timeouts, dropped connections and 5xx answers."""
    if isinstance(exc, HTTPClientError | ConnectionError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(exc) in SERVER_ERROR_CODES or int(status or 0) >= 500
    return False


@dataclass
class Retrier:
    """Bounded exponential backoff with full jitter around one DynamoDB call."""

    max_attempts: int = 8
    base_delay: float = 0.025
    max_delay: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    jitter: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int) -> float:
        """The pause before retry number ``attempt`` (1-based)."""
        return min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1)) * self.jitter()

    def call(
        self,
        operation: Callable[[], T],
        *,
        on_retry: Callable[[BaseException], None] | None = None,
        retry_if: Callable[[BaseException], bool] | None = None,
    ) -> T:
        """Run ``operation``; resend it on throttling or transient errors.

        ``on_retry`` sees each retried error (the caller remembers that an
        earlier attempt may have been applied). ``retry_if`` adds error kinds
        to retry. Anything else is re-raised unchanged for the caller to map;
        when the budget is spent, :class:`DynamoDBUnavailableError` is raised.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return operation()
            except (ClientError, BotoCoreError) as exc:
                retryable = (
                    is_throttling(exc)
                    or is_transient(exc)
                    or (retry_if is not None and retry_if(exc))
                )
                if not retryable:
                    raise
                if attempt >= self.max_attempts:
                    raise DynamoDBUnavailableError(
                        f"DynamoDB call failed after {attempt} attempts: "
                        f"{error_code(exc) or type(exc).__name__}"
                    ) from exc
                if on_retry is not None:
                    on_retry(exc)
                self.sleep(self.delay(attempt))


def request_error(exc: BaseException) -> DynamoDBRequestError | DynamoDBUnavailableError:
    """Map an error nobody handled to a persistence error the store understands."""
    code = error_code(exc) or type(exc).__name__
    if isinstance(exc, ClientError) and code in {
        "ValidationException",
        "ResourceNotFoundException",
        "SerializationException",
    }:
        return DynamoDBRequestError(f"DynamoDB rejected the request: {code}")
    return DynamoDBUnavailableError(f"DynamoDB call failed: {code}")
