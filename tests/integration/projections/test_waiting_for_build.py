"""``waiting_for_build``: derived from the queued list when it is read, on every
store's view store; nothing is written for it."""

from __future__ import annotations

from datetime import timedelta

from domain.timeutil import format_utc
from projections.attention import count_waiting_for_build, waiting_for_build
from projections.ports import ViewRecord, ViewStore
from projections.status import STATUS_VIEW, status_list_key
from tests.support.clocks import START

THRESHOLD = 600


def queued_row(number: int, seconds_ago: float) -> ViewRecord:
    key = f"att_{number:064x}"
    updated = format_utc(START - timedelta(seconds=seconds_ago))
    return ViewRecord(
        name=STATUS_VIEW,
        key=key,
        version=1,
        data={"attempt_id": key, "status": "queued", "updated_at": updated},
        list_pk=status_list_key("queued"),
        list_sk=f"{updated}#{key}",
    )


def test_only_queued_attempts_older_than_the_threshold_are_listed(views: ViewStore) -> None:
    # 7 waiting (two within one second, one of them with fractional seconds), 3 not yet
    ages = [3600, 1800, 1200, 900, 700.5, 700, 601, 599, 60, 0]
    for number, age in enumerate(ages):
        views.put_view(queued_row(number, age))
    views.put_view(  # another list is never read
        ViewRecord(STATUS_VIEW, "att_x", 1, {"updated_at": format_utc(START)}, "status#failed_safe")
    )

    seen, cursor, pages = [], None, 0
    while True:
        rows, cursor = waiting_for_build(views, START, THRESHOLD, 3, cursor)
        seen += [r.key for r in rows]
        pages += 1
        if cursor is None:
            break
    assert sorted(seen) == sorted(f"att_{n:064x}" for n in range(7))
    assert len(seen) == len(set(seen)) and pages == 3
    assert count_waiting_for_build(views, START, THRESHOLD) == 7
    assert count_waiting_for_build(views, START + timedelta(seconds=1), THRESHOLD) == 8
    assert count_waiting_for_build(views, START, THRESHOLD, cap=5) == 5


def test_an_attempt_leaves_the_entry_when_its_view_moves_on(views: ViewStore) -> None:
    views.put_view(queued_row(1, 3600))
    assert count_waiting_for_build(views, START, THRESHOLD) == 1
    leased = queued_row(1, 0)
    views.put_view(
        ViewRecord(
            leased.name,
            leased.key,
            2,
            {**leased.data, "status": "executing"},
            status_list_key("executing"),
            leased.list_sk,
        )
    )
    assert count_waiting_for_build(views, START, THRESHOLD) == 0
