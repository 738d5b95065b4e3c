"""The channel's own durable state: one small SQLite file.

One row per presentation the channel holds: where its message went, what the
message shows (``shown_revision``) and what it should show (``revision``),
and, until the actor decides, the token, sealed (``channels.sealing``). The
outbox (``ChannelService.sync``) works from ``revision > shown_revision``,
so a message edit that a crash or the platform cut off is made after the
restart. A ``seen`` table holds what was already handled (a Telegram
update id, a Slack signature): a replay finds it and changes nothing.

WAL and ``synchronous=FULL``: a decision recorded here survives a kill.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from channels.outcomes import DECIDED, Decision, Outcome, Phase, moves_forward
from channels.platform import SentMessage

SEEN_KEPT_SECONDS = 3 * 86400
"""Telegram retries an update for at most a day; Slack's signatures last five minutes."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS presentations (
  reference TEXT PRIMARY KEY,
  presentation_id TEXT NOT NULL UNIQUE,
  token_mac TEXT NOT NULL,
  sealed_token BLOB,
  proposal_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  actor_id TEXT NOT NULL,
  identity_binding_id TEXT NOT NULL,
  channel_binding_id TEXT NOT NULL,
  conversation_key TEXT NOT NULL,
  user TEXT NOT NULL,
  conversation TEXT NOT NULL,
  preview TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  expires_epoch REAL NOT NULL,
  phase TEXT NOT NULL,
  detail TEXT,
  votes INTEGER,
  required INTEGER,
  attempt_id TEXT,
  revision INTEGER NOT NULL,
  shown_revision INTEGER NOT NULL,
  message_conversation TEXT,
  message_id TEXT,
  next_try_at REAL NOT NULL,
  tries INTEGER NOT NULL,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS presentations_by_version ON presentations (proposal_id, version);
CREATE INDEX IF NOT EXISTS presentations_open ON presentations (expires_epoch)
  WHERE phase IN ('open', 'voted');
CREATE INDEX IF NOT EXISTS presentations_due ON presentations (next_try_at)
  WHERE message_id IS NULL OR shown_revision < revision;
CREATE TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY, at REAL NOT NULL);
"""
_OPEN = (Phase.OPEN.value, Phase.VOTED.value)


@dataclass(frozen=True)
class Held:
    """One presentation the channel holds (a row of ``presentations``)."""

    reference: str
    presentation_id: str
    token_mac: str
    sealed_token: bytes | None
    proposal_id: str
    version: int
    actor_id: str
    identity_binding_id: str
    channel_binding_id: str
    conversation_key: str
    user: str
    conversation: str
    preview: str
    expires_at: str
    expires_epoch: float
    phase: Phase
    detail: str | None = None
    votes: int | None = None
    required: int | None = None
    attempt_id: str | None = None
    revision: int = 1
    shown_revision: int = 0
    message_conversation: str | None = None
    message_id: str | None = None
    next_try_at: float = 0.0
    tries: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def sent(self) -> SentMessage | None:
        if self.message_id is None or self.message_conversation is None:
            return None
        return SentMessage(self.message_conversation, self.message_id)


_COLUMNS = tuple(f.name for f in fields(Held))


def _row(values: sqlite3.Row) -> Held:
    data: dict[str, Any] = dict(zip(_COLUMNS, values, strict=True))
    data["phase"] = Phase(data["phase"])
    return Held(**data)


def _most(held: int | None, answered: int | None) -> int | None:
    """The votes to show: a later answer never shows fewer than a sibling's tally did."""
    if answered is None:
        return held
    return answered if held is None else max(held, answered)


class State:
    """The state file; safe to use from several threads of one process."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # sealed tokens inside: readable by this user only
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _select(self, where: str, *args: Any) -> list[Held]:
        with self._lock:
            cursor = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM presentations {where}", args
            )
            return [_row(r) for r in cursor.fetchall()]

    # -- presentations ------------------------------------------------------------------

    def add(self, held: Held) -> tuple[Held, bool]:
        """Store a new presentation; the stored one (and False) when its id is held."""
        with self._write() as db:
            existing = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM presentations WHERE presentation_id = ?",
                (held.presentation_id,),
            ).fetchone()
            if existing is not None:
                return _row(existing), False
            values = [getattr(held, c) for c in _COLUMNS]
            values[_COLUMNS.index("phase")] = held.phase.value
            db.execute(
                f"INSERT INTO presentations ({', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in _COLUMNS)})",
                values,
            )
        return held, True

    def get(self, reference: str) -> Held | None:
        found = self._select("WHERE reference = ?", reference)
        return found[0] if found else None

    def by_presentation(self, presentation_id: str) -> Held | None:
        found = self._select("WHERE presentation_id = ?", presentation_id)
        return found[0] if found else None

    def of_version(self, proposal_id: str, version: int) -> list[Held]:
        return self._select("WHERE proposal_id = ? AND version = ?", proposal_id, version)

    def count(self) -> int:
        with self._lock:
            (n,) = self._db.execute("SELECT COUNT(*) FROM presentations").fetchone()
            return int(n)

    def _advance(
        self, db: sqlite3.Connection, held: Held, phase: Phase, now: float, **changes: Any
    ) -> Held:
        """The row moved to ``phase`` (one revision more); the token erased once decided."""
        moved = replace(
            held,
            phase=phase,
            revision=held.revision + 1,
            updated_at=now,
            next_try_at=0.0,
            tries=0,
            sealed_token=None if phase in DECIDED else held.sealed_token,
            **changes,
        )
        db.execute(
            "UPDATE presentations SET phase = ?, detail = ?, votes = ?, required = ?, "
            "attempt_id = ?, revision = ?, sealed_token = ?, next_try_at = 0, tries = 0, "
            "updated_at = ? WHERE reference = ? AND revision = ?",
            (
                moved.phase.value,
                moved.detail,
                moved.votes,
                moved.required,
                moved.attempt_id,
                moved.revision,
                moved.sealed_token,
                now,
                held.reference,
                held.revision,
            ),
        )
        return moved

    def decide(self, reference: str, decision: Decision, now: float) -> Held | None:
        """Record what the ledger answered a press; None when the row was already further."""
        with self._write() as db:
            row = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM presentations WHERE reference = ?",
                (reference,),
            ).fetchone()
            if row is None:
                return None
            held = _row(row)
            if not moves_forward(held.phase, decision.phase):
                return None
            moved = self._advance(
                db,
                held,
                decision.phase,
                now,
                attempt_id=decision.attempt_id or held.attempt_id,
                votes=_most(held.votes, decision.votes),
                required=decision.required if decision.required is not None else held.required,
            )
            if decision.votes is not None:
                self._tally(db, held.proposal_id, held.version, decision, now)
            if decision.phase is Phase.APPROVED:
                self._claimed(db, moved, now)
            return moved

    def _claimed(self, db: sqlite3.Connection, claimer: Held, now: float) -> None:
        """The version is claimed (a quorum's last vote, or an approval): every other
        message of it still waiting says so at once, not only when the attempt settles."""
        rows = db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM presentations "
            "WHERE proposal_id = ? AND version = ? AND phase IN (?, ?) AND reference != ?",
            (claimer.proposal_id, claimer.version, *_OPEN, claimer.reference),
        ).fetchall()
        for held in map(_row, rows):
            self._advance(db, held, Phase.APPROVED, now, attempt_id=claimer.attempt_id)

    def _tally(
        self, db: sqlite3.Connection, proposal_id: str, version: int, d: Decision, now: float
    ) -> None:
        """Show the votes so far on every other approver's message of the version."""
        rows = db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM presentations "
            "WHERE proposal_id = ? AND version = ? AND phase IN (?, ?)",
            (proposal_id, version, *_OPEN),
        ).fetchall()
        for held in map(_row, rows):
            if (held.votes, held.required) != (d.votes, d.required) and (
                held.votes is None or (d.votes or 0) > held.votes
            ):
                db.execute(
                    "UPDATE presentations SET votes = ?, required = ?, revision = revision + 1, "
                    "next_try_at = 0, tries = 0, updated_at = ? WHERE reference = ?",
                    (d.votes, d.required, now, held.reference),
                )

    def apply(self, outcome: Outcome, now: float) -> int:
        """A fact from a ledger webhook, on every row of its version it moves forward."""
        moved = 0
        with self._write() as db:
            rows = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM presentations "
                "WHERE proposal_id = ? AND version = ?",
                (outcome.proposal_id, outcome.version),
            ).fetchall()
            for held in map(_row, rows):
                if moves_forward(held.phase, outcome.phase):
                    self._advance(
                        db,
                        held,
                        outcome.phase,
                        now,
                        detail=outcome.detail,
                        attempt_id=outcome.attempt_id or held.attempt_id,
                    )
                    moved += 1
        return moved

    def expire_due(self, now: float) -> int:
        """Open presentations whose expiry has passed become expired (tokens erased)."""
        moved = 0
        with self._write() as db:
            rows = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM presentations "
                "WHERE phase IN (?, ?) AND expires_epoch <= ?",
                (*_OPEN, now),
            ).fetchall()
            for held in map(_row, rows):
                self._advance(db, held, Phase.EXPIRED, now)
                moved += 1
        return moved

    # -- the outbox ---------------------------------------------------------------------

    def due(self, now: float, limit: int = 50) -> list[Held]:
        """Rows whose message is not sent, or shows less than it should, due by now."""
        return self._select(
            "WHERE (message_id IS NULL OR shown_revision < revision) AND next_try_at <= ? "
            "ORDER BY next_try_at, created_at LIMIT ?",
            now,
            limit,
        )

    def next_due_at(self) -> float | None:
        with self._lock:
            (at,) = self._db.execute(
                "SELECT MIN(next_try_at) FROM presentations "
                "WHERE message_id IS NULL OR shown_revision < revision"
            ).fetchone()
            return None if at is None else float(at)

    def next_expiry(self) -> float | None:
        """When the next open presentation expires."""
        with self._lock:
            (at,) = self._db.execute(
                "SELECT MIN(expires_epoch) FROM presentations WHERE phase IN (?, ?)", _OPEN
            ).fetchone()
            return None if at is None else float(at)

    def mark_sent(self, reference: str, sent: SentMessage, revision: int) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE presentations SET message_conversation = ?, message_id = ?, "
                "shown_revision = MAX(shown_revision, ?), tries = 0, next_try_at = 0 "
                "WHERE reference = ?",
                (sent.conversation, sent.message_id, revision, reference),
            )

    def mark_shown(self, reference: str, revision: int, *, unsent: bool = False) -> None:
        """The message shows ``revision`` (``unsent``: none will be sent, nothing to show)."""
        with self._write() as db:
            db.execute(
                "UPDATE presentations SET shown_revision = MAX(shown_revision, ?), tries = 0, "
                "next_try_at = 0, message_id = CASE WHEN ? THEN '' ELSE message_id END "
                "WHERE reference = ?",
                (revision, unsent and True, reference),
            )

    def retry_later(self, reference: str, at: float) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE presentations SET tries = tries + 1, next_try_at = ? WHERE reference = ?",
                (at, reference),
            )

    # -- replays ------------------------------------------------------------------------

    def claim_seen(self, key: str, now: float) -> bool:
        """True the first time ``key`` is claimed; False for a replay."""
        with self._write() as db:
            cursor = db.execute("INSERT OR IGNORE INTO seen (key, at) VALUES (?, ?)", (key, now))
            return cursor.rowcount == 1

    def forget_seen(self, key: str) -> None:
        """Undo a claim whose handling failed, so the platform's retry is handled."""
        with self._write() as db:
            db.execute("DELETE FROM seen WHERE key = ?", (key,))

    def prune(self, now: float) -> None:
        with self._write() as db:
            db.execute("DELETE FROM seen WHERE at < ?", (now - SEEN_KEPT_SECONDS,))
