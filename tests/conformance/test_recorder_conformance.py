"""The eventsourcing library's own recorder test cases, run on our recorders.

design.md 7.1: the library's own recorder test cases "are the conformance suite".
Each suite below binds one library case to the backend mixins of
``tests/conformance/backends.py``; another backend plugs in with one more
class per case it supports. DynamoDB has its own file
(``test_dynamodb_conformance.py``): it offers the aggregate case only.

Performance cases are inherited unchanged: each writes at most a few
thousand events and only prints a rate, which takes well under a few
seconds on the embedded backends.
"""

from __future__ import annotations

import uuid
from typing import Any
from unittest import TestCase

import eventsourcing.tests.persistence as library
from eventsourcing.persistence import AggregateRecorder, StoredEvent

from adapters.recorder import LedgerRecorder
from tests.conformance.backends import Backend, MemoryBackend, SQLiteBackend


class AggregateOnly(AggregateRecorder):
    """A ledger recorder seen through the ``AggregateRecorder`` interface alone.

    The memory and SQLite ledger recorders are *process* recorders, so their
    ``insert_events`` returns notification ids (the application case below
    checks those ids). The aggregate case pins an aggregate recorder's
    ``None``; everything else it checks runs on the real recorder.
    """

    def __init__(self, recorder: LedgerRecorder) -> None:
        self.recorder = recorder

    def insert_events(self, stored_events: Any, **kwargs: Any) -> None:
        self.recorder.insert_events(stored_events, **kwargs)

    def select_events(self, originator_id: Any, **kwargs: Any) -> Any:
        return self.recorder.select_events(originator_id, **kwargs)


# -- the library's cases, bound to a backend ------------------------------------------


class AggregateCase(Backend, library.AggregateRecorderTestCase):
    __test__ = False

    def create_recorder(self) -> AggregateRecorder:
        return AggregateOnly(self.create_ledger_recorder())


class ApplicationCase(Backend, library.ApplicationRecorderTestCase):
    __test__ = False

    def create_recorder(self) -> Any:
        return self.create_ledger_recorder()


class TrackingCase(Backend, library.TrackingRecorderTestCase):
    __test__ = False

    def create_recorder(self) -> Any:
        return self.create_ledger_recorder()


class ProcessCase(Backend, library.ProcessRecorderTestCase):
    __test__ = False

    def create_recorder(self) -> Any:
        return self.create_ledger_recorder()


class NonInterleavingCase(Backend, library.NonInterleavingNotificationIDsBaseCase):
    """Two concurrent commits never interleave their notification ids, so a
    projection reading the notification log sees each commit as one run."""

    __test__ = False

    def create_recorder(self) -> Any:
        return self.create_ledger_recorder()


# -- memory ------------------------------------------------------------------------------


class TestMemoryAggregateRecorder(MemoryBackend, AggregateCase):
    __test__ = True


class TestMemoryAggregateRecorderWithUUIDs(MemoryBackend, AggregateCase):
    """Stock eventsourcing aggregates use UUID ids; the memory store keeps them."""

    __test__ = True

    def new_originator_id(self) -> uuid.UUID:
        return uuid.uuid4()


class TestMemoryApplicationRecorder(MemoryBackend, ApplicationCase):
    __test__ = True

    def test_insert_subscribe(self) -> None:
        # Optional in the library: only recorders with subscriptions run it.
        self.optional_test_insert_subscribe()


class TestMemoryTrackingRecorder(MemoryBackend, TrackingCase):
    __test__ = True


class TestMemoryProcessRecorder(MemoryBackend, ProcessCase):
    __test__ = True


class TestMemoryNonInterleavingNotificationIDs(MemoryBackend, NonInterleavingCase):
    __test__ = True


# -- SQLite --------------------------------------------------------------------------------
# The SQLite datastore is opened with text originator ids (the ledger's
# ``actor:alice`` / ``att_<hex>`` streams), so every case uses text ids.
# The library's SQLite application recorder has no ``subscribe`` (it raises
# NotImplementedError), so the optional subscription case is not run here;
# embedded projections poll the notification log instead.


class TestSQLiteAggregateRecorder(SQLiteBackend, AggregateCase):
    __test__ = True


class TestSQLiteApplicationRecorder(SQLiteBackend, ApplicationCase):
    __test__ = True


class TestSQLiteTrackingRecorder(SQLiteBackend, TrackingCase):
    __test__ = True


class TestSQLiteProcessRecorder(SQLiteBackend, ProcessCase):
    __test__ = True


class TestSQLiteNonInterleavingNotificationIDs(SQLiteBackend, NonInterleavingCase):
    __test__ = True


# -- the ledger's text ids survive every backend --------------------------------------------


class TextIdsRoundTrip(Backend):
    """Not a library case: the one property the library cases assume silently."""

    __test__ = False

    def test_text_stream_ids_come_back_as_the_same_text(self) -> None:
        recorder = self.create_ledger_recorder()
        stream = "att_" + uuid.uuid4().hex
        recorder.insert_events([StoredEvent(stream, 1, "topic", b"{}")])

        (stored,) = recorder.select_events(stream)

        assert stored.originator_id == stream
        assert isinstance(stored.originator_id, str)


class TestMemoryTextIds(MemoryBackend, TextIdsRoundTrip, TestCase):
    __test__ = True


class TestSQLiteTextIds(SQLiteBackend, TextIdsRoundTrip, TestCase):
    __test__ = True
