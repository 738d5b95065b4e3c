"""A tool call of an agent, routed through the ledger: what the framework adapters share.

An agent framework pauses a tool call for a human; the ledger makes the call
exactly once after that human's approval. :class:`LedgerGate` joins the two:

- :meth:`LedgerGate.propose` turns one tool call into one proposal, keyed by
  the tool call's id (the ``Idempotency-Key`` of the proposal and of its
  presentation), and hands the presentation to ``deliver`` (the channel that
  shows it to the actor; the agent never sees its token);
- :meth:`LedgerGate.decision` reads what the actor decided;
- :meth:`LedgerGate.result` reads the attempt's redacted result, waiting for it.

Nothing here runs the tool: the ledger's executor does, once, after the
approval. A resumed agent reads the ledger's result again, so an approved call
never runs twice, however often the agent resumes.

The exact spec of each call is written to a :class:`Journal` before it is
sent, and the proposal id after, so a process that starts again after a crash
sends the same request (the server answers the stored proposal) or none at
all. :class:`MemoryJournal` lasts as long as the process; :class:`FileJournal`
survives it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ledger_client import answers as a
from ledger_client._base import decode
from ledger_client.aio import AsyncClient
from ledger_client.errors import LedgerClientError
from ledger_client.requests import ProposalSpec, Provenance
from ledger_client.spec import SpecDigests, make_spec, pick_build

PENDING = "awaiting_approval"
APPROVED = "approved"
MAX_WAIT_SECONDS = 3600.0
MAX_KEY_CHARS = 255


class UnknownToolCall(LedgerClientError):
    """A tool call this gate has no proposal for (never proposed, or its journal is gone)."""


@dataclass(frozen=True)
class GatedTool:
    """What the proposer binds into the proposal of each call of one tool.

    The call's arguments are the spec's ``content``; the newest available build
    of ``capability`` runs it.
    """

    capability: str
    permission: str
    effect: str
    destination: str
    digests: SpecDigests
    sources: tuple[str, ...] = ()
    expires_in: timedelta = timedelta(hours=24)


@dataclass(frozen=True)
class PendingApproval:
    """A presentation for the actor's channel: its token is for the channel only."""

    call_id: str
    actor: Provenance
    proposal: a.ProposalOut
    presentation: a.PresentationOut


Deliver = Callable[[PendingApproval], Awaitable[None]]
"""Shows a presentation to its actor (posts it to the chat service, for example).
It may be called again with the same presentation after a crash: the
presentation id names it."""


@dataclass(frozen=True)
class Decision:
    """What the actor decided about one tool call's proposal."""

    call_id: str
    proposal_id: str
    status: str
    """``awaiting_approval``, ``approved``, or the version's refusal: ``declined``,
    ``expired``, ``canceled``, ``superseded``, ``conflicted``."""
    attempt_id: str | None = None

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    @property
    def approved(self) -> bool:
        return self.status == APPROVED

    @property
    def refused(self) -> bool:
        """Decided, and no attempt will come of it: the tool never runs."""
        return not self.pending and not self.approved


@dataclass(frozen=True)
class LedgerResult:
    """The ledger's redacted result of one approved call, as the agent sees it."""

    call_id: str
    proposal_id: str
    attempt_id: str
    status: str
    settled: bool
    receipt: dict[str, Any] | None = None
    reason_code: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_json(self) -> dict[str, Any]:
        """What the model is told: ids, the status, the receipt and the reason code."""
        out: dict[str, Any] = {
            "proposal_id": self.proposal_id,
            "attempt_id": self.attempt_id,
            "status": self.status,
            "settled": self.settled,
        }
        if self.receipt is not None:
            out["receipt"] = self.receipt
        if self.reason_code is not None:
            out["reason_code"] = self.reason_code
        return out

    @classmethod
    def of(cls, call_id: str, attempt: a.AttemptOut) -> LedgerResult:
        result = attempt.result
        return cls(
            call_id=call_id,
            proposal_id=attempt.proposal_id,
            attempt_id=attempt.attempt_id,
            status=attempt.status,
            settled=attempt.settled,
            receipt=None if result is None else result.receipt,
            reason_code=None if result is None else result.reason_code,
        )


class Journal(Protocol):
    """Small durable records by key, written once: the first value stays."""

    def get(self, key: str) -> str | None: ...

    def put_if_absent(self, key: str, value: str) -> str:
        """Store ``value`` unless the key has one; the value the key has now."""
        ...


@dataclass
class MemoryJournal:
    """A journal of this process only (a crash forgets it)."""

    entries: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, key: str) -> str | None:
        with self._lock:
            return self.entries.get(key)

    def put_if_absent(self, key: str, value: str) -> str:
        with self._lock:
            return self.entries.setdefault(key, value)


class FileJournal:
    """A journal in an SQLite file: it survives the process, and processes may share it."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS journal (key TEXT PRIMARY KEY, value TEXT)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def get(self, key: str) -> str | None:
        db = self._db()
        try:
            row = db.execute("SELECT value FROM journal WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
        return None if row is None else str(row[0])

    def put_if_absent(self, key: str, value: str) -> str:
        db = self._db()
        try:
            with db:
                db.execute("INSERT OR IGNORE INTO journal (key, value) VALUES (?, ?)", (key, value))
            (stored,) = db.execute("SELECT value FROM journal WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
        return str(stored)


class LedgerGate:
    """Routes an agent's tool calls through one ledger, for one actor.

    ``ledger`` acts with a proposer token; ``deliver`` shows each presentation
    to ``actor`` (its channel approves or declines there); ``journal`` keeps
    each call's exact request (:class:`FileJournal` to survive a crash).
    ``reader`` reads the attempts' status: the ledger shows an attempt only to
    its actor (an ``actor`` token of it, or its channel's) and to admins,
    never to a proposer, so give it one of those tokens.
    ``sleep`` and ``clock`` drive :meth:`decision`'s polling.
    """

    def __init__(
        self,
        ledger: AsyncClient,
        actor: Provenance,
        deliver: Deliver,
        *,
        reader: AsyncClient | None = None,
        journal: Journal | None = None,
        poll_seconds: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.ledger = ledger
        self.actor = actor
        self.deliver = deliver
        self.reader = reader if reader is not None else ledger
        self.journal: Journal = journal if journal is not None else MemoryJournal()
        self.poll_seconds = poll_seconds
        self._sleep = sleep
        self._now = now

    async def propose(
        self, tool: GatedTool, call_id: str, arguments: Mapping[str, Any]
    ) -> Decision:
        """The proposal of this call, made once (keyed by ``call_id``) and presented to
        the actor; again for the same call: no request is sent, the decision is read."""
        if not call_id:
            raise ValueError("call_id: a tool call needs its id (the idempotency key)")
        proposal_id = self.journal.get(f"{call_id}/proposal")
        made: a.ProposalOut | None = None
        if proposal_id is None:
            spec = await self._spec(tool, call_id, arguments)
            made = await self.ledger.propose(
                self.actor, spec, idempotency_key=proposal_key(call_id)
            )
            proposal_id = self.journal.put_if_absent(f"{call_id}/proposal", made.proposal_id)
        decision = await self._read(call_id, proposal_id)
        if decision.pending and self.journal.get(f"{call_id}/delivered") is None:
            if made is None:  # a crash came before the delivery: the stored answer again
                spec = await self._spec(tool, call_id, arguments)
                made = await self.ledger.propose(
                    self.actor, spec, idempotency_key=proposal_key(call_id)
                )
            await self._present(call_id, made)
        return decision

    async def decision(self, call_id: str, *, wait_seconds: float = 0.0) -> Decision:
        """What the actor decided; with ``wait_seconds``, polled until decided or then."""
        proposal_id = self._proposal_id(call_id)
        deadline = self._now() + timedelta(seconds=min(max(wait_seconds, 0.0), MAX_WAIT_SECONDS))
        while True:
            decision = await self._read(call_id, proposal_id)
            if not decision.pending or self._now() >= deadline:
                return decision
            await self._sleep(self.poll_seconds)

    async def result(self, call_id: str, *, timeout: float = 60.0) -> LedgerResult:
        """The ledger's result of an approved call, once settled or at ``timeout``
        (then ``settled`` is false); never runs anything."""
        decision = await self.decision(call_id)
        if decision.attempt_id is None:
            raise UnknownToolCall(f"tool call {call_id!r} is {decision.status}: it has no attempt")
        attempt = await self.reader.wait(decision.attempt_id, timeout=timeout)
        return LedgerResult.of(call_id, attempt)

    def knows(self, call_id: str) -> bool:
        """Whether this gate's journal has a proposal of the call."""
        return self.journal.get(f"{call_id}/proposal") is not None

    def _proposal_id(self, call_id: str) -> str:
        proposal_id = self.journal.get(f"{call_id}/proposal")
        if proposal_id is None:
            raise UnknownToolCall(f"tool call {call_id!r} was not proposed through this journal")
        return proposal_id

    async def _spec(
        self, tool: GatedTool, call_id: str, arguments: Mapping[str, Any]
    ) -> ProposalSpec:
        key = f"{call_id}/spec"
        text = self.journal.get(key)
        if text is None:
            build = pick_build(await self.ledger.executors(), tool.capability)
            spec = make_spec(
                build,
                dict(arguments),
                permission=tool.permission,
                effect=tool.effect,
                destination=tool.destination,
                digests=tool.digests,
                sources=tool.sources,
                expires_at=self._now() + tool.expires_in,
            )
            text = self.journal.put_if_absent(key, json.dumps(spec.to_json(), sort_keys=True))
        return decode(ProposalSpec, json.loads(text))

    async def _present(self, call_id: str, proposal: a.ProposalOut) -> None:
        key = presentation_key(call_id)
        shown = await self.ledger.present(proposal, self.actor, idempotency_key=key)
        await self.deliver(PendingApproval(call_id, self.actor, proposal, shown))
        self.journal.put_if_absent(f"{call_id}/delivered", shown.presentation_id)

    async def _read(self, call_id: str, proposal_id: str) -> Decision:
        view = await self.ledger.get_proposal(proposal_id)
        return decision_of(call_id, view)


def proposal_key(call_id: str) -> str:
    """The proposal's ``Idempotency-Key``: the tool call's id (a digest of it when it
    cannot be a key: over 255 characters, or not printable ASCII)."""
    if len(call_id) <= MAX_KEY_CHARS and call_id.isascii() and call_id.isprintable():
        return call_id
    return "tool-call-sha256:" + hashlib.sha256(call_id.encode()).hexdigest()


def presentation_key(call_id: str) -> str:
    """The presentation's ``Idempotency-Key`` (a key names one request of its caller)."""
    return "presentation-of-tool-call-sha256:" + hashlib.sha256(call_id.encode()).hexdigest()


def decision_of(call_id: str, view: a.ProposalViewOut) -> Decision:
    """The decision about the current version of a proposal."""
    current = next(v for v in view.versions if v.version == view.current_version)
    if current.status == "presented":
        return Decision(call_id, view.proposal_id, PENDING)
    if current.status == "claimed":
        return Decision(call_id, view.proposal_id, APPROVED, current.attempt_id)
    return Decision(call_id, view.proposal_id, current.status)


def arguments_of(text: str | None) -> dict[str, Any]:
    """A tool call's JSON arguments as an object (``{}`` when empty)."""
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a tool call's arguments must be a JSON object")
    return value
