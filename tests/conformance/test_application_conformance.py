"""The eventsourcing library's application-level test, on our persistence.

``ExampleApplicationTestCase`` runs a small bank-account application (events,
snapshots, the notification log) configured only through environment
variables, so it is pointed at our recorders by the library's own hooks:

- SQLite: the library's ``SQLiteFactory`` with ``APPLICATION_RECORDER_TOPIC``
  naming ``SQLiteLedgerRecorder``; snapshots stay in the factory's plain
  aggregate recorder (the ledger does not snapshot).
- memory: ``POPOFactory`` has no recorder-topic hook, so a two-line factory
  subclass below hands out ``MemoryLedgerRecorder``.

The application uses UUID aggregate ids, so the SQLite datastore keeps the
library's default ``uuid`` id type here (the ledger itself uses text ids).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import eventsourcing.tests.application as library
from eventsourcing.persistence import ApplicationRecorder
from eventsourcing.popo import POPOFactory
from eventsourcing.utils import get_topic

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder


class MemoryLedgerFactory(POPOFactory):
    """The POPO factory, handing out the ledger's memory recorder."""

    def application_recorder(self) -> ApplicationRecorder:
        return MemoryLedgerRecorder()


class TestSQLiteLedgerApplication(library.ExampleApplicationTestCase):
    expected_factory_topic = "eventsourcing.sqlite:SQLiteFactory"

    def setUp(self) -> None:
        directory = Path(tempfile.mkdtemp(prefix="ledger-app-"))
        self.addCleanup(shutil.rmtree, directory, True)
        patched = mock.patch.dict(
            os.environ,
            {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(directory / "app.db"),
                "APPLICATION_RECORDER_TOPIC": get_topic(SQLiteLedgerRecorder),
            },
        )
        patched.start()
        self.addCleanup(patched.stop)

    def test_application_runs_on_the_ledger_recorder(self) -> None:
        app = library.BankAccounts()
        self.addCleanup(app.close)

        account_id = app.open_account(full_name="Alice", email_address="alice@example.com")

        self.assertIsInstance(app.recorder, SQLiteLedgerRecorder)
        self.assertEqual(app.get_account(account_id).full_name, "Alice")


class TestMemoryLedgerApplication(library.ExampleApplicationTestCase):
    expected_factory_topic = get_topic(MemoryLedgerFactory)

    def setUp(self) -> None:
        patched = mock.patch.dict(
            os.environ, {"PERSISTENCE_MODULE": get_topic(MemoryLedgerFactory)}
        )
        patched.start()
        self.addCleanup(patched.stop)

    def test_application_runs_on_the_ledger_recorder(self) -> None:
        app = library.BankAccounts()

        account_id = app.open_account(full_name="Alice", email_address="alice@example.com")

        self.assertIsInstance(app.recorder, MemoryLedgerRecorder)
        self.assertEqual(app.get_account(account_id).full_name, "Alice")
