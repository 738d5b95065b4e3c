"""What a view store knows it holds: only ever a version it wrote or saw refused,
forgotten oldest first."""

from __future__ import annotations

from adapters.dynamodb.known_versions import KnownVersions
from projections.ports import ViewRecord


def row(key: str, version: int) -> ViewRecord:
    return ViewRecord(name="v", key=key, version=version, data={})


def test_a_row_at_or_below_a_remembered_version_is_held_and_a_newer_one_is_not() -> None:
    known = KnownVersions()
    known.remember([row("a", 3)])
    assert known.holds(row("a", 2)) and known.holds(row("a", 3))
    assert not known.holds(row("a", 4))
    assert not known.holds(row("b", 1))


def test_an_older_version_never_lowers_what_is_remembered() -> None:
    known = KnownVersions()
    known.remember([row("a", 5), row("a", 2)])
    assert known.holds(row("a", 5))


def test_the_least_recently_used_key_is_forgotten_first() -> None:
    known = KnownVersions(size=2)
    known.remember([row("a", 1), row("b", 1)])
    known.remember([row("a", 2)])  # a used again: b is the oldest
    known.remember([row("c", 1)])
    assert known.holds(row("a", 2)) and known.holds(row("c", 1))
    assert not known.holds(row("b", 1))
