"""design.md 11.2 classification, receipts, templating, deadlines and bounded reading, against
the reference provider's own counters."""

from __future__ import annotations

import os
import time

import pytest

from domain.errors import (
    ExecutorKeyReused,
    ExecutorNoEffect,
    ExecutorOutcomeUncertain,
    ExecutorReceiptUnusable,
)
from tests.support.http_executors import Build, request_for
from tests.support.provider_fixtures import Provider


def key() -> str:
    return "idem:" + os.urandom(12).hex()


def test_a_2xx_is_success_with_the_receipt_cut_to_the_pointers_and_a_replay_is_the_same(
    http_executor: Build, provider: Provider
) -> None:
    executor = http_executor()
    k = key()
    first = executor.execute(request_for(executor, k))
    again = executor.execute(request_for(executor, k))
    assert dict(first.data) == dict(again.data)
    assert set(first.data) == {"id", "status"}  # key_hash is in the answer, not in the receipt
    assert first.data["status"] == "created"
    assert provider.effects()[k] == 1
    assert provider.requests()[k] == 2


@pytest.mark.parametrize(
    ("fault", "effects"),
    [
        ("reject_4xx", 0),
    ],
)
def test_a_4xx_proves_no_write(
    http_executor: Build, provider: Provider, fault: str, effects: int
) -> None:
    executor = http_executor()
    k = key()
    with pytest.raises(ExecutorNoEffect) as caught:
        executor.execute(request_for(executor, k, content={"fault": fault}))
    assert caught.value.reason_code == "provider_rejected_400"
    assert provider.effects().get(k, 0) == effects


def test_a_422_is_the_providers_key_already_used_and_other_4xx_are_plain_no_writes(
    http_executor: Build, provider: Provider
) -> None:
    """The classes the worker tells apart on a re-send: a 422 (the IETF draft's "key
    reused with another request") is ExecutorKeyReused, a 400 or 401 is not."""
    executor = http_executor()
    k = key()
    executor.execute(request_for(executor, k, content={"title": "Buy milk"}))
    with pytest.raises(ExecutorKeyReused) as caught:
        executor.execute(request_for(executor, k, content={"title": "Buy bread"}))
    assert caught.value.reason_code == "provider_rejected_422"
    assert provider.effects()[k] == 1
    for status in (400, 401):
        refused = key()
        content = {"fault": "drop_then_reject", "reject_status": status}
        with pytest.raises(ExecutorOutcomeUncertain):  # applied, answer lost
            executor.execute(request_for(executor, refused, content=content))
        with pytest.raises(ExecutorNoEffect) as plain:
            executor.execute(request_for(executor, refused, content=content))
        assert not isinstance(plain.value, ExecutorKeyReused)
        assert plain.value.reason_code == f"provider_rejected_{status}"
        assert (provider.effects()[refused], provider.requests()[refused]) == (1, 2)


@pytest.mark.parametrize(
    ("fault", "effects"),
    [
        ("error_5xx", 0),
        ("conflict_409", 0),
        ("throttle_429", 0),
        ("drop_after_effect", 1),
    ],
)
def test_5xx_408_409_425_429_and_a_dropped_connection_are_ambiguous(
    http_executor: Build, provider: Provider, fault: str, effects: int
) -> None:
    executor = http_executor()
    k = key()
    with pytest.raises(ExecutorOutcomeUncertain):
        executor.execute(request_for(executor, k, content={"fault": fault}))
    assert provider.effects().get(k, 0) == effects


def test_a_wrong_credential_is_a_4xx_no_write(
    http_executor: Build, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = http_executor()
    executor.config = type(executor.config)(
        executor.config.entry,
        1,
        executor.config.url,
        None,
        executor.config.receipt_keys,
        (("Authorization", "Bearer wrong"),),
    )
    k = key()
    with pytest.raises(ExecutorNoEffect) as caught:
        executor.execute(request_for(executor, k))
    assert caught.value.reason_code == "provider_rejected_401"
    assert k not in provider.effects()


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("not_json", "response_not_json"),
        ("huge_answer", "response_too_large"),
    ],
)
def test_an_unreadable_2xx_answer_is_unusable_with_a_bounded_reason(
    http_executor: Build, provider: Provider, fault: str, reason: str
) -> None:
    executor = http_executor()
    k = key()
    started = time.monotonic()
    with pytest.raises(ExecutorReceiptUnusable) as caught:
        executor.execute(request_for(executor, k, content={"fault": fault, "size_mb": 50}))
    assert caught.value.reason_code == reason
    assert provider.effects()[k] == 1
    if fault == "huge_answer":  # refused from its Content-Length: 50 MB are never read
        assert time.monotonic() - started < 5


def test_a_receipt_pointer_that_does_not_resolve_is_unusable(
    http_executor: Build, provider: Provider
) -> None:
    executor = http_executor(receipt='["/id", "/nope"]')
    with pytest.raises(ExecutorReceiptUnusable) as caught:
        executor.execute(request_for(executor, key()))
    assert caught.value.reason_code == "receipt_pointer_missing"


def test_a_huge_answer_without_content_length_is_cut_at_the_bound(http_executor: Build) -> None:
    from adapters.executors.http import _read_bounded

    class Streamed:
        headers: dict[str, str] = {}
        read = 0

        def iter_bytes(self):  # type: ignore[no-untyped-def]
            while True:
                self.read += 65536
                yield b" " * 65536

    answer = Streamed()
    assert _read_bounded(answer, 1024 * 1024) is None  # type: ignore[arg-type]
    assert answer.read <= 1024 * 1024 + 65536


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["hang", "late_answer", "trickle"])
def test_a_hung_or_trickling_provider_never_holds_the_call_past_the_deadline(
    http_executor: Build, provider: Provider, fault: str
) -> None:
    executor = http_executor(timeout=30)  # the lease deadline is the tighter bound
    k = key()
    started = time.monotonic()
    with pytest.raises(ExecutorOutcomeUncertain):
        executor.execute(
            request_for(executor, k, seconds=1.0, content={"fault": fault, "delay": 4})
        )
    elapsed = time.monotonic() - started
    assert elapsed < 1.0 + 0.5, elapsed


def test_a_deadline_already_passed_sends_nothing(http_executor: Build, provider: Provider) -> None:
    executor = http_executor()
    k = key()
    with pytest.raises(ExecutorOutcomeUncertain):
        executor.execute(request_for(executor, k, seconds=-1))
    assert k not in provider.requests()


def test_values_are_percent_encoded_and_never_change_host_or_path_segments(
    http_executor: Build, provider: Provider
) -> None:
    executor = http_executor()
    executor.config = type(executor.config)(
        executor.config.entry,
        1,
        __import__("adapters.executors.http_config", fromlist=["x"]).parse_template(
            provider.url + "/v1/{destination}/{target_id}",
            frozenset({"destination", "target_id"}),
            "url",
            production=False,
        ),
        None,
        executor.config.receipt_keys,
        executor.config.header_values,
    )
    for hostile in ("../../admin", "..", "a/b?x=1#frag", "@evil.example", "%2e%2e", "é ü"):
        executor.execute(
            request_for(executor, key(), target={"id": hostile, "base_revision": "r1"})
        )
    paths = [p for p in provider._get("/_effects")["paths"] if p.startswith("/v1/tasks/")][-6:]
    assert paths == [
        "/v1/tasks/..%2F..%2Fadmin",
        "/v1/tasks/%2E%2E",
        "/v1/tasks/a%2Fb%3Fx%3D1%23frag",
        "/v1/tasks/%40evil.example",
        "/v1/tasks/%252e%252e",
        "/v1/tasks/%C3%A9%20%C3%BC",
    ]


def test_connections_are_reused(http_executor: Build, provider: Provider) -> None:
    executor = http_executor()
    before = provider._get("/_effects")["connections"]
    for _ in range(5):
        executor.execute(request_for(executor, key()))
    assert provider._get("/_effects")["connections"] - before == 1


def test_tls_verification_is_on_by_default() -> None:
    import ssl

    from adapters.executors.http_transport import DeadlineTransport

    context = DeadlineTransport().ssl_context
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert DeadlineTransport(verify=False).ssl_context.verify_mode is ssl.CERT_NONE


def test_the_reconciler_reads_by_key_only(http_executor: Build, provider: Provider) -> None:
    from adapters.executors.http import HttpReconciler

    executor = http_executor("correlation_lookup")
    reconciler = HttpReconciler(executor)
    k = key()
    assert reconciler.lookup(request_for(executor, k)).verdict == "not_applied"
    executor.execute(request_for(executor, k))
    found = reconciler.lookup(request_for(executor, k))
    assert found.verdict == "applied" and set(found.receipt or {}) == {"id", "status"}
    assert provider.effects()[k] == 1
    assert provider.requests()[k] == 1  # lookups are GETs on another route, never a write


def test_the_reconciler_says_unknown_when_the_provider_cannot_answer(
    http_executor: Build, provider: Provider
) -> None:
    from adapters.executors.http import HttpReconciler
    from adapters.executors.http_config import parse_template

    executor = http_executor("correlation_lookup")
    reconciler = HttpReconciler(executor)
    reconciler.template = parse_template(
        "http://127.0.0.1:9/{idempotency_key}",
        frozenset({"idempotency_key"}),
        "lookup_url",
        production=False,
    )
    assert reconciler.lookup(request_for(executor, key())).verdict == "unknown"


def test_the_provider_answers_422_for_another_body_and_409_while_in_flight(
    provider: Provider,
) -> None:
    import threading

    import httpx

    headers = {"Authorization": f"Bearer {provider.token}", "Idempotency-Key": key()}
    slow = threading.Thread(
        target=httpx.post,
        args=(provider.url + "/v1/tasks",),
        kwargs={"json": {"fault": "late_answer", "delay": 1}, "headers": headers, "timeout": 10},
    )
    slow.start()
    for _ in range(200):
        if provider.requests().get(headers["Idempotency-Key"]):
            break
        time.sleep(0.01)
    during = httpx.post(
        provider.url + "/v1/tasks",
        json={"fault": "late_answer", "delay": 1},
        headers=headers,
        timeout=10,
    )
    slow.join()
    other = httpx.post(
        provider.url + "/v1/tasks", json={"title": "other"}, headers=headers, timeout=10
    )
    assert (during.status_code, other.status_code) == (409, 422)
    assert provider.effects()[headers["Idempotency-Key"]] == 1


def test_the_provider_applies_nothing_for_a_body_cut_short(provider: Provider) -> None:
    """A client killed between its headers and its body made no request: a provider
    that applied the empty body would answer the whole re-send 422, as if the key
    had been used for another request (the rolling deploy's SIGKILL found this)."""
    import socket
    from urllib.parse import urlsplit

    import httpx

    idem = key()
    address = urlsplit(provider.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/tasks HTTP/1.1\r\nHost: provider\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {provider.token}\r\nIdempotency-Key: {idem}\r\n".encode()
            + b"Content-Length: 19\r\n\r\n"
        )
        sock.shutdown(socket.SHUT_WR)  # the body never comes
        assert sock.recv(1024) == b""  # dropped, no answer
    headers = {"Authorization": f"Bearer {provider.token}", "Idempotency-Key": idem}
    whole = httpx.post(provider.url + "/v1/tasks", json={"title": "x"}, headers=headers)
    assert whole.status_code == 201
    assert provider.effects()[idem] == 1
