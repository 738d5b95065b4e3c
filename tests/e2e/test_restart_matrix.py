"""After any restart every status view and every list equals a fresh rebuild,
with no manual step (real `ledger serve`, `ledger recover --once` and `ledger
worker` processes on one store).

Each cell: a server with execution off takes approvals, is stopped gracefully
or with SIGKILL, another process executes the attempts while it is down, and
the server starts again. Before the projector tracked its position, the
`recover_once` cells found every view stale (`queued` for good, missing from
the `succeeded` list); see `python -m tests.support.restart`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.restart import (
    STOPS,
    WRITERS,
    Harness,
    Result,
    StoreUnderTest,
    killed_under_load,
    scenario,
)

pytestmark = pytest.mark.slow  # real server processes, started and stopped several times


def check(result: Result) -> None:
    assert result.caught_up, "/readyz never said the status projector caught up"
    assert result.stale == [], f"{len(result.stale)} stale views after the restart"
    assert result.wrong_reads == []
    assert result.missing_from_list == []


@pytest.fixture
def harness_on(tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def make(store: StoreUnderTest) -> Harness:
        harness = Harness(store, tmp_path)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


# The 2 x 3 matrix of ways to stop and writers, split between the stores: each
# cell runs once, on one store, and each store meets both stops and every writer
# (the whole matrix on one store: `python -m tests.support.restart --store ...`).
DYNAMODB_CELLS = [("graceful", "recover_once"), ("sigkill", "worker"), ("sigkill", "second_serve")]
SQLITE_CELLS = [("graceful", "worker"), ("graceful", "second_serve"), ("sigkill", "recover_once")]


def test_the_stores_share_every_cell_of_the_matrix() -> None:
    cells = SQLITE_CELLS + DYNAMODB_CELLS
    assert sorted(cells) == sorted((stop, writer) for stop in STOPS for writer in WRITERS)
    for split in (SQLITE_CELLS, DYNAMODB_CELLS):
        assert {stop for stop, _ in split} == set(STOPS)
        assert {writer for _, writer in split} == set(WRITERS)


@pytest.mark.parametrize(("stop", "writer"), SQLITE_CELLS)
def test_sqlite_views_equal_a_rebuild_after_a_restart(
    harness_on: Any, tmp_path: Path, stop: str, writer: str
) -> None:
    check(scenario(harness_on(StoreUnderTest.sqlite(tmp_path)), stop, writer))


@pytest.mark.dynamodb
@pytest.mark.parametrize(("stop", "writer"), DYNAMODB_CELLS)
def test_dynamodb_views_equal_a_rebuild_after_a_restart(
    harness_on: Any,
    dynamodb_endpoint: str,
    dynamodb_client: Any,
    dynamodb_table_name: str,
    stop: str,
    writer: str,
) -> None:
    store = StoreUnderTest.dynamodb(dynamodb_endpoint, dynamodb_table_name, dynamodb_client)
    check(scenario(harness_on(store), stop, writer))


def test_sqlite_views_equal_a_rebuild_after_sigkills_under_load(
    harness_on: Any, tmp_path: Path
) -> None:
    result = killed_under_load(harness_on(StoreUnderTest.sqlite(tmp_path)), kills=2)
    assert result.caught_up
    assert result.attempts and result.stale == []
