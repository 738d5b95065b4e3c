"""One table of event words: every event of every aggregate has its words, and
the Mermaid diagram and the console's SVG label and place an event alike."""

from __future__ import annotations

import random
import re
from html import unescape
from typing import Any

from api.console.svg import COLORS, timeline_svg
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.base import LedgerAggregate, LedgerEvent
from domain.directory import DirectoryRecord
from domain.proposal import Proposal
from domain.restore import RestoreLog
from projections.audit import SETTLED, mermaid_state_diagram, timeline
from projections.labels import (
    EVENT_WORDS,
    OBSERVATION_EVENTS,
    RESULT_EVENT,
    STATE_AFTER,
    event_label,
    event_words,
    state_after,
)
from tests.support.attempt_histories import random_history


def events_of(cls: type[LedgerAggregate]) -> set[str]:
    """The short names of the event classes an aggregate declares (not the
    ``Event`` and ``Created`` bases every aggregate gets)."""
    return {
        name
        for name, value in vars(cls).items()
        if isinstance(value, type)
        and issubclass(value, LedgerEvent)
        and value.__qualname__ == f"{cls.__qualname__}.{name}"
        and name not in ("Event", "Created")
    }


def test_every_event_of_the_attempt_and_the_proposal_has_its_words() -> None:
    attempt, proposal, directory, restores = (
        events_of(ExecutionAttempt),
        events_of(Proposal),
        events_of(DirectoryRecord),
        events_of(RestoreLog),
    )
    assert {"Queued", "ResultRecorded", "ManuallyResolved"} <= attempt
    assert {"Proposed", "Claimed", "Declined"} <= proposal
    assert {"BackupRestored", "RestoreSettled"} <= restores
    # a short name means one event whatever the stream
    kinds = (attempt, proposal, directory, restores)
    assert sum(len(k) for k in kinds) == len(set().union(*kinds))
    assert set(EVENT_WORDS) == attempt | proposal | directory | restores
    assert all(words and words == words.strip() for words in EVENT_WORDS.values())
    assert event_words("SomethingNew") == "SomethingNew"


def test_every_event_of_the_attempt_has_its_place_on_the_state_path() -> None:
    placed = set(STATE_AFTER) | {RESULT_EVENT} | OBSERVATION_EVENTS
    assert placed == events_of(ExecutionAttempt)
    statuses = {s.value for s in AttemptStatus}
    assert set(STATE_AFTER.values()) <= statuses
    assert set(COLORS) == statuses  # every state has its colour in the picture
    assert {"succeeded", "failed_safe", "manually_resolved"} == SETTLED


def rows(**data: Any) -> dict[str, Any]:
    kind = data.pop("type")
    return {"version": data.pop("version", 2), "type": kind, "data": data, "recorded_at": "t"}


def test_the_words_the_two_copies_differed_on() -> None:
    """Leased named its generation ``g2`` in the diagram and ``(generation 2)``
    in the picture; a requeue's reason showed only in the picture."""
    assert event_label(rows(type="Leased", generation=2)) == "v2 leased (generation 2)"
    assert event_label(rows(type="Requeued", reason="backoff")) == "v2 requeued (backoff)"
    assert (
        event_label(rows(type="ResultRecorded", status="failed_safe", reason_code="no_write"))
        == "v2 result recorded (no_write)"
    )
    assert (
        event_label(rows(type="ManuallyResolved", outcome="no_effect", reason="checked"))
        == "v2 manually resolved (no_effect)"
    )
    assert state_after(rows(type="LateResultObserved", kind="succeeded"), "failed_safe") == (
        "failed_safe"
    )
    assert state_after(rows(type="ResultRecorded", status="succeeded"), "executing") == (
        "succeeded"
    )


def test_the_diagram_and_the_picture_label_every_event_alike() -> None:
    rng = random.Random(11)
    for n in range(40):
        events: list[Any] = []
        for attempt in random_history(rng, n):
            events += attempt.collect_events()
        shown = timeline(events)
        diagram = mermaid_state_diagram(shown)
        picture = unescape(timeline_svg(shown))
        texts = re.findall(r'font-size="14"[^>]*>([^<]*)</text>', picture)
        assert texts == [event_label(row) for row in shown]
        said = [line.rsplit(" : ", 1)[1] for line in diagram.splitlines() if " : " in line]
        assert said == texts
        final = attempt.status.value
        assert f"{final} · " in picture.rsplit("<circle", 1)[1]
        assert diagram.rstrip().endswith(
            f"{final} --> [*]" if final in SETTLED else f" : {said[-1]}"
        )
