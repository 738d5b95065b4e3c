"""Wait-for-result: ``GET /execution-attempts/{id}?wait=`` wakes on the view change."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.view_changes import NotifyingViewStore
from projections.ports import ViewRecord
from tests.support.http_helpers import API, Headers, assert_error, propose_and_present, run_worker

pytestmark = pytest.mark.usefixtures("directory")


class CountingReads:
    """Counts view reads: a waiting request must not read the store."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        self.reads += 1
        got: ViewRecord | None = self.inner.get_view(name, key)
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def approved(client: TestClient, bearer: Callable[..., Headers]) -> str:
    token = propose_and_present(client, bearer)
    answer = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel", subject="chat-backend")
    )
    assert answer.status_code == 202
    attempt_id: str = answer.json()["attempt_id"]
    return attempt_id


def in_background(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    return thread, box


def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.005)


def test_a_waiter_wakes_on_the_view_change_without_reading_while_it_waits(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    admin: Headers,
) -> None:
    attempt_id = approved(client, bearer)
    owner = bearer("actor", subject="alice")
    # the view exists first (a read of an unprojected attempt projects it, which
    # is itself a change the waiter would see)
    assert client.get(f"{API}/execution-attempts/{attempt_id}", headers=owner).status_code == 200
    views = ledger.views
    assert isinstance(views, NotifyingViewStore)
    counting = CountingReads(views.inner)
    views.inner = counting  # type: ignore[assignment]
    thread, box = in_background(
        lambda: client.get(
            f"{API}/execution-attempts/{attempt_id}", params={"wait": 30}, headers=owner
        )
    )
    until(lambda: views.changes.waiting() == 1)
    until(lambda: counting.reads >= 1)
    reads_when_waiting = counting.reads
    assert reads_when_waiting == 1
    time.sleep(0.3)  # idle: a polling implementation would read here
    assert counting.reads == reads_when_waiting

    assert run_worker(ledger, attempt_id) == "succeeded"
    thread.join(10)
    assert not thread.is_alive(), "the waiter was not woken by the view change"
    (answer,) = box
    assert answer.status_code == 200
    assert answer.json()["status"] == "succeeded"
    assert counting.reads == reads_when_waiting  # the wake-up carried the new row
    assert views.changes.waiting() == 0


def test_a_settled_attempt_answers_at_once_and_a_timeout_answers_the_current_status(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    admin: Headers,
) -> None:
    done = approved(client, bearer)
    run_worker(ledger, done)
    settled = client.get(f"{API}/execution-attempts/{done}", params={"wait": 30}, headers=admin)
    assert settled.json()["status"] == "succeeded"
    queued = approved(client, bearer)
    waited = client.get(f"{API}/execution-attempts/{queued}", params={"wait": 1}, headers=admin)
    assert waited.status_code == 200
    assert waited.json()["status"] == "queued"


def test_a_stranger_gets_the_missing_answer_without_waiting(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = approved(client, bearer)
    stranger = bearer("actor", subject="mallory")
    missing = client.get(
        f"{API}/execution-attempts/att_{'0' * 64}", params={"wait": 30}, headers=stranger
    )
    hidden = client.get(
        f"{API}/execution-attempts/{attempt_id}", params={"wait": 30}, headers=stranger
    )
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content
    assert isinstance(ledger.views, NotifyingViewStore)
    assert ledger.views.changes.waiting() == 0


@pytest.mark.parametrize("wait", ["0", "31", "-1", "soon"])
def test_a_wait_outside_1_to_30_gets_422(
    client: TestClient, bearer: Callable[..., Headers], admin: Headers, wait: str
) -> None:
    attempt_id = approved(client, bearer)
    assert_error(
        client.get(f"{API}/execution-attempts/{attempt_id}", params={"wait": wait}, headers=admin),
        422,
        "invalid_input",
    )
