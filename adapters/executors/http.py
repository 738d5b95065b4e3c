"""The built-in ``http`` executor and its read-only reconciler (design.md 11.2).

One request per call, with the attempt's idempotency key in the configured
header and the spec's ``content`` as canonical JSON. No retries here: the
ledger's delivery modes decide what is retried. The whole exchange (connect,
TLS, send, every read) ends by an absolute deadline, the earlier of the
configured timeout and the deadline the worker passes, which lies inside the
lease; a provider that trickles bytes cannot stretch it, because every socket
operation gets only the time that is left. Answers are read up to a bound, so
a huge answer is never held whole.

Classification: 2xx is success and the receipt is cut to the configured JSON
pointers; 4xx other than 408, 409, 425 and 429 proves that this request wrote
nothing (``ExecutorNoEffect``: failed_safe on the first dispatch only), a 422
being the provider's "key already used" (``ExecutorKeyReused``: on a re-send,
evidence of an earlier effect); everything else (timeout, reset, 5xx, 3xx,
408/409/425/429) is ambiguous and follows the delivery mode.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx

from adapters.executors.digest import build_digest, code_identity
from adapters.executors.http_config import HttpConfigError, HttpExecutorConfig, UrlTemplate
from adapters.executors.http_transport import DeadlineTransport
from adapters.executors.http_transport import until as _until
from domain.canonical import canonical_json
from domain.errors import (
    ExecutorKeyReused,
    ExecutorNoEffect,
    ExecutorOutcomeUncertain,
    ExecutorReceiptUnusable,
)
from domain.ports import Clock, ExecutionReceipt, ExecutionRequest, ReconcileAnswer

KIND = "http"
AMBIGUOUS_4XX = frozenset({408, 409, 425, 429})
KEY_REUSED = 422  # the IETF Idempotency-Key draft: the key was used with another request
MIN_SECONDS = 0.05  # less time than this left: do not start a request at all
USER_AGENT = "execution-ledger-http-executor"


def http_code_identity() -> str:
    """The code identity of the http executor: its own source files."""
    return code_identity(
        "adapters.executors.http",
        "adapters.executors.http_config",
        "adapters.executors.http_transport",
    )


# -- the client ----------------------------------------------------------------------


def make_client(*, verify: bool = True) -> httpx.Client:
    """A client that reuses its connections and whose sockets honour the thread's deadline.

    No redirects are followed, no proxy or netrc is read from the environment,
    and the transport never retries.
    """
    # httpx logs every request line at INFO and httpcore logs answer headers at DEBUG:
    # URLs and provider data stay out of the logs (I10), whatever the root level.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return httpx.Client(
        transport=DeadlineTransport(verify=verify),
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
    )


# -- reading answers ----------------------------------------------------------------


def _read_bounded(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or None as soon as it is longer than ``limit`` (never read whole)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


ReceiptKeys = tuple[tuple[str, tuple[str, ...]], ...]


def cut_receipt(body: bytes | None, keys: ReceiptKeys) -> dict[str, Any]:
    """The receipt: only the configured JSON pointers of a JSON answer, each a scalar.

    Raises ``ExecutorReceiptUnusable`` with a bounded code; the caller never
    sees the body. The worker then applies the receipt rules of I10.
    """
    if not keys:
        return {}
    if body is None:
        raise ExecutorReceiptUnusable("response_too_large")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ExecutorReceiptUnusable("response_not_json") from None
    receipt: dict[str, Any] = {}
    for key, tokens in keys:
        value: Any = document
        for token in tokens:
            if isinstance(value, dict) and token in value:
                value = value[token]
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                raise ExecutorReceiptUnusable("receipt_pointer_missing")
        if isinstance(value, dict | list | float):
            raise ExecutorReceiptUnusable("receipt_value_not_scalar")
        receipt[key] = value
    return receipt


# -- the executor and the reconciler ---------------------------------------------------


def _template_values(request: ExecutionRequest, template: UrlTemplate) -> dict[str, str]:
    values = {"destination": request.spec.destination, "idempotency_key": request.idempotency_key}
    if request.spec.target is not None:
        values["target_id"] = request.spec.target.id
    missing = template.fields - values.keys()
    if missing:
        # Decided before any byte is sent, the same way for every generation.
        raise ExecutorNoEffect(reason_code="url_value_missing")
    return values


class HttpExecutor:
    """Performs one effect with one HTTP request; see the module docstring."""

    kind = KIND

    def __init__(
        self,
        config: HttpExecutorConfig,
        *,
        clock: Clock,
        client: httpx.Client | None = None,
        code: str | None = None,
    ) -> None:
        entry = config.entry
        self.config = config
        self.capability = entry.capability
        self.delivery_mode = entry.delivery_mode
        self.build_digest = build_digest(code or http_code_identity(), config.digest_config())
        self.settle_seconds = config.settle_seconds
        self.draining = entry.draining
        self.clock = clock
        self.client = client or make_client(verify=entry.tls_verify)

    def __repr__(self) -> str:
        return f"HttpExecutor({self.capability} {self.build_digest})"

    def _seconds_left(self, request: ExecutionRequest) -> float:
        until_deadline = (request.deadline - self.clock.now()).total_seconds()
        return min(self.config.entry.timeout_seconds, until_deadline)

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        entry = self.config.entry
        try:
            url = self.config.url.render(_template_values(request, self.config.url))
        except HttpConfigError:
            raise ExecutorNoEffect(reason_code="url_not_built") from None
        seconds = self._seconds_left(request)
        if seconds < MIN_SECONDS:
            # Nothing is sent, but an earlier generation may have been: ambiguous.
            raise ExecutorOutcomeUncertain()
        headers = dict(self.config.header_values)
        headers[entry.idempotency_header] = request.idempotency_key
        headers["Content-Type"] = "application/json"
        body = canonical_json(dict(request.spec.content))
        end = time.monotonic() + seconds
        try:
            with (
                _until(end),
                self.client.stream(
                    entry.method, url, content=body, headers=headers, timeout=seconds
                ) as response,
            ):
                status = response.status_code
                if 200 <= status < 300:
                    keys = self.config.receipt_keys
                    raw = _read_bounded(response, entry.max_response_bytes) if keys else None
                    return ExecutionReceipt(cut_receipt(raw, keys))
        except httpx.HTTPError:
            raise ExecutorOutcomeUncertain() from None
        if status == KEY_REUSED:
            raise ExecutorKeyReused(reason_code=f"provider_rejected_{status}")
        if 400 <= status < 500 and status not in AMBIGUOUS_4XX:
            raise ExecutorNoEffect(reason_code=f"provider_rejected_{status}")
        raise ExecutorOutcomeUncertain()

    def close(self) -> None:
        self.client.close()


class HttpReconciler:
    """Read-only lookup by idempotency key: 200 applied, 404 not applied, else unknown."""

    def __init__(self, executor: HttpExecutor) -> None:
        assert executor.config.lookup_url is not None
        self.executor = executor
        self.template = executor.config.lookup_url

    def lookup(self, request: ExecutionRequest) -> ReconcileAnswer:
        config = self.executor.config
        try:
            url = self.template.render(_template_values(request, self.template))
        except (HttpConfigError, ExecutorNoEffect):
            return ReconcileAnswer("unknown")
        seconds = self.executor._seconds_left(request)
        if seconds < MIN_SECONDS:
            return ReconcileAnswer("unknown")
        end = time.monotonic() + seconds
        try:
            with (
                _until(end),
                self.executor.client.stream(
                    "GET", url, headers=dict(config.header_values), timeout=seconds
                ) as response,
            ):
                if response.status_code == 404:
                    return ReconcileAnswer("not_applied")
                if response.status_code != 200:
                    return ReconcileAnswer("unknown")
                raw = _read_bounded(response, config.entry.max_response_bytes)
        except httpx.HTTPError:
            return ReconcileAnswer("unknown")
        try:
            return ReconcileAnswer("applied", cut_receipt(raw, config.receipt_keys))
        except ExecutorReceiptUnusable:
            return ReconcileAnswer("unknown")


def build_http(configs: list[HttpExecutorConfig], clock: Clock) -> list[tuple[Any, Any]]:
    """(executor, reconciler or None) for each checked entry."""
    code = http_code_identity()
    built: list[tuple[Any, Any]] = []
    for config in configs:
        executor = HttpExecutor(config, clock=clock, code=code)
        reconciler = HttpReconciler(executor) if config.lookup_url is not None else None
        built.append((executor, reconciler))
    return built
