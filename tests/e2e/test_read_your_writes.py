"""A status read right after a 202 never answers 404 (README: "never a 404").

The route projected an unseen attempt on the spot and gave up when the view
store refused the write because another writer (the projector, a second
reader) had stored the same version first: 19 of 300 first reads with 4
concurrent clients answered 404.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from projections.ports import ViewRecord
from tests.support.first_reads import first_reads
from tests.support.http_approvals import API, approve_one, set_up_directory
from tests.support.http_helpers import Headers
from tests.support.restart import Harness, StoreUnderTest


class SameVersionFirst:
    """A view store where another writer stores the same version between this
    reader's miss and its own write (which the version guard then refuses)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.races = 0

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Any]) -> int:
        self.inner.put_views(records, ())  # the other writer wins
        self.races += 1
        written: int = self.inner.put_views(records, tracking)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_first_read_that_loses_the_view_write_still_answers_the_status(
    client: TestClient, ledger: Ledger, admin: Headers, bearer: Callable[..., Headers]
) -> None:
    set_up_directory(client)  # type: ignore[arg-type]
    attempt_id = approve_one(client, 0)  # type: ignore[arg-type]
    raced = SameVersionFirst(ledger.views)
    ledger.views = raced  # type: ignore[assignment]
    answer = client.get(f"{API}/execution-attempts/{attempt_id}", headers=admin)
    assert raced.races == 1
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "queued"
    owner = bearer("actor", subject="alice")
    assert (
        client.get(f"{API}/execution-attempts/{attempt_id}", headers=owner).json()["status"]
        == "queued"
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    harness = Harness(StoreUnderTest.sqlite(tmp_path), tmp_path)
    try:
        yield harness.serve(execution=False).base
    finally:
        harness.close()


@pytest.mark.slow
def test_many_concurrent_first_reads_after_202_never_answer_404(server: str) -> None:
    """A real server with its projector running; 4 readers released together
    right after each 202."""
    codes = first_reads(server, approvals=40, readers=4)
    assert codes == {200: 160}, codes
    assert httpx.get(server + "/readyz").status_code == 200
