"""Pytest plugin: ``scoped``, a stepped in-process ledger on each store (memory,
SQLite, the emulator) with two proposers, an admin, and two actors who can approve.

The clock starts at the real time to the second: the emulator reaps lookup
items whose TTL has really passed, so every expiry a test reads lies ahead of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.bootstrap import build_ledger
from adapters.settings import load_settings
from adapters.store import LedgerStore
from adapters.system import ManualClock
from api.embedded.ledger import EmbeddedLedger
from api.service.principal import Principal, Role
from api.testing import SteppedLedger
from domain.services.approval import Provenance


@dataclass
class Scoped:
    """The host ledger (directory, worker) and views of it acting as one caller."""

    host: SteppedLedger
    alice: Provenance
    bob: Provenance

    def proposer(self, subject: str) -> EmbeddedLedger:
        return self.host.acting_as(Principal(subject, Role.PROPOSER))

    @property
    def admin(self) -> EmbeddedLedger:
        return self.host.acting_as(Principal("ops", Role.ADMIN))

    def channel(self, who: Provenance) -> EmbeddedLedger:
        return self.host.acting_as(Principal("chat-backend", Role.CHANNEL, provenance=who))

    def spec(self, **changes: Any) -> dict[str, Any]:
        """A valid fake spec that stays unexpired for 30 days."""
        return self.host.fake_spec(**{"expires_in": 30 * 86400, **changes})

    def present_to(
        self, caller: EmbeddedLedger, proposal_id: str, who: Provenance, version: int = 1
    ) -> Any:
        return caller.present(
            proposal_id,
            version=version,
            identity_binding_id=who.identity_binding_id,
            channel_binding_id=who.channel_binding_id,
            conversation_key=who.conversation_key,
        )


def scoped_on(store: LedgerStore, **settings: Any) -> Scoped:
    """A :class:`Scoped` world over ``store``'s recorder."""
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    wiring = build_ledger(
        load_settings(**{"store": "memory", "env": "test", **settings}),
        clock=clock,
        recorder=store.recorder,
    )
    host = SteppedLedger(clock, wiring=wiring, start=False)
    for entry in host.executors():
        if entry.kind == "fake":
            host.put_executor_build(
                entry.capability, entry.build_digest, delivery_mode=entry.delivery_mode
            )
    return Scoped(host, host.add_approver("alice"), host.add_approver("bob"))


@pytest.fixture
def scoped(store: LedgerStore) -> Iterator[Scoped]:
    world = scoped_on(store)
    yield world
    world.host.wiring.registry.close()
