"""The http executor's transport: an absolute deadline on every socket operation.

httpx's timeouts bound each operation (connect, read, write, a wait for the
pool) on its own, so a provider that trickles its answer a byte at a time
holds the call for as long as it likes. Here every socket operation gets only
the time left before the deadline of the call in progress on its thread
(:func:`until`), and one already past it fails at once as a timeout.

Everything used is public API: httpx's ``BaseTransport`` (a custom transport),
httpcore's ``ConnectionPool`` with a ``network_backend`` of our own, and
httpcore's ``NetworkBackend`` / ``NetworkStream`` interfaces, which its
documentation offers for custom networking ("Network Backends"). httpx's own
``HTTPTransport`` builds the same pool but takes no network backend, hence this
transport instead of it.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_deadline = threading.local()


@contextmanager
def until(end: float) -> Iterator[None]:
    """Socket operations on this thread end by ``end`` (``time.monotonic()``)."""
    _deadline.end = end
    try:
        yield
    finally:
        _deadline.end = None


def _left(default: float | None) -> float | None:
    end: float | None = getattr(_deadline, "end", None)
    if end is None:
        return default
    left = end - time.monotonic()
    return left if default is None else min(default, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        left = _left(timeout)
        if left is not None and left <= 0:
            raise httpcore.ReadTimeout("deadline reached")
        return self._inner.read(max_bytes, left)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        left = _left(timeout)
        if left is not None and left <= 0:
            raise httpcore.WriteTimeout("deadline reached")
        self._inner.write(buffer, left)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _left(timeout)
        if left is not None and left <= 0:
            raise httpcore.ConnectTimeout("deadline reached")
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with every operation bounded by :func:`until`."""

    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        left = _left(timeout)
        if left is not None and left <= 0:
            raise httpcore.ConnectTimeout("deadline reached")
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, left, local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._inner.connect_unix_socket(path, _left(timeout), socket_options)
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# httpcore's errors as httpx's (most specific first), so callers catch httpx.HTTPError.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


class _Body(httpx.SyncByteStream):
    """An answer's body as httpcore streams it, its errors as httpx's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            with _as_httpx_errors():
                close()


class DeadlineTransport(httpx.BaseTransport):
    """An HTTP/1.1 transport with a connection pool (connections reused, never retried) whose
    sockets end by the deadline of :func:`until`.

    No proxy and no environment setting is read: the transport connects to the
    URL it is given. ``verify=False`` turns certificate checks off (for a
    provider on a test network only; the executors file says so).
    """

    def __init__(self, *, verify: bool = True, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits()
        self.ssl_context = httpx.create_ssl_context(verify=verify, trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=self.ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            retries=0,
            network_backend=DeadlineBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = self._pool.handle_request(core_request)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()
