"""Fake executors and reconciler for development, demos and tests.

Behaviour is chosen by the spec's ``content["simulate"]``: ``success`` (default),
``no_write_error``, ``timeout_before_effect``, ``timeout_after_effect``,
``unsafe_receipt``, ``slow``, ``lookup_unknown`` (succeeds, but the
reconciler cannot tell), ``resend_rejected`` and ``resend_key_reused`` (applies,
the answer is lost, and a later call with the key is refused: a rotated
credential's 401, a reused key's 422). ``slow`` takes the time it names
(``content["slow_seconds"]``, default: until one second past the deadline) on
the injected clock, never in real time, then applies the effect and answers; on
a clock that cannot be moved (the system clock) it applies the effect and
reports a timeout instead.

The fake keeps an effect ledger by idempotency key so tests can count real
effects: in memory by default (:class:`EffectLedger`), or in a file that several
processes share (:class:`FileEffectLedger`), so multi-process crash tests can
count the effects of every process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, overload

from adapters.executors.digest import build_digest
from adapters.executors.registry import StaticExecutorRegistry
from domain.directory import DeliveryMode
from domain.errors import ExecutorKeyReused, ExecutorNoEffect, ExecutorOutcomeUncertain
from domain.ports import Clock, ExecutionReceipt, ExecutionRequest, ReconcileAnswer
from domain.spec import content_schema_digest, sha256_tag

FAKE_CAPABILITIES: dict[str, DeliveryMode] = {
    "fake.provider_idempotency": DeliveryMode.PROVIDER_IDEMPOTENCY,
    "fake.correlation_lookup": DeliveryMode.CORRELATION_LOOKUP,
    "fake.operator_only": DeliveryMode.OPERATOR_RECONCILIATION_ONLY,
}
# The in-memory ledger keeps at most this many keys and recorded calls/lookups
# (oldest dropped first), so a long-running development server does not grow
# without bound; counts of calls stay exact.
MAX_RECORDS = 100_000
MAX_SLOW_SECONDS = 86_400
# A later call with a key that has an effect is refused: (error, reason code).
RESEND_REFUSALS: dict[str, tuple[type[ExecutorNoEffect], str]] = {
    "resend_rejected": (ExecutorNoEffect, "provider_rejected_401"),
    "resend_key_reused": (ExecutorKeyReused, "provider_rejected_422"),
}
# The page cache of the file-backed ledger's connection, in KiB.
CACHE_KIB = 256


SIMULATIONS = (
    "success",
    "no_write_error",
    "timeout_before_effect",
    "timeout_after_effect",
    "unsafe_receipt",
    "slow",
    "lookup_unknown",
    "resend_rejected",
    "resend_key_reused",
)
"""Every behaviour ``content["simulate"]`` can choose (the module docstring says what each does)."""


def fake_content_schema(capability: str) -> dict[str, Any]:
    """The content schema of a fake build: a ``title``, the behaviour to simulate
    and the time ``slow`` takes; other fields are allowed (and ignored)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{capability} content",
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 1000},
            "simulate": {"enum": list(SIMULATIONS)},
            "slow_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_SLOW_SECONDS},
        },
    }


def fake_schema_digest(capability: str) -> str:
    """The ``schema_digest`` a spec for a fake build names."""
    return content_schema_digest(fake_content_schema(capability))


def fake_build_digest(capability: str) -> str:
    """The fixed build digest of a fake executor: its version and its content
    schema (a changed schema is a new build, as for every executor)."""
    return build_digest(
        sha256_tag(f"fake-executor/{capability}/v1".encode()),
        {"kind": "fake", "content_schema": fake_content_schema(capability)},
    )


class Effects(Protocol):
    """What the fakes and the tests need of an effect ledger."""

    def record_call(self, capability: str, key: str) -> None: ...

    def record_lookup(self, key: str) -> None: ...

    def apply(self, key: str, receipt: dict[str, Any], *, once: bool = False) -> dict[str, Any]:
        """Record one effect; ``once``: unless one exists (then return the first)."""
        ...

    def first(self, key: str) -> dict[str, Any] | None: ...

    def effect_count(self, key: str) -> int: ...

    def max_effects_per_key(self) -> int: ...

    def call_count(self) -> int: ...


@dataclass
class EffectLedger:
    """Real effects by idempotency key, and every call made (thread-safe, one process)."""

    effects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _calls_total: int = 0

    def record_call(self, capability: str, key: str) -> None:
        with self._lock:
            self.calls.append((capability, key))
            self._calls_total += 1
            _trim(self.calls)

    def record_lookup(self, key: str) -> None:
        with self._lock:
            self.lookups.append(key)
            _trim(self.lookups)

    def apply(self, key: str, receipt: dict[str, Any], *, once: bool = False) -> dict[str, Any]:
        with self._lock:
            found = self.effects.get(key)
            if once and found:
                return dict(found[0])
            self.effects.setdefault(key, []).append(receipt)
            while len(self.effects) > MAX_RECORDS:
                del self.effects[next(iter(self.effects))]
            return receipt

    def first(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.effects.get(key)
            return dict(found[0]) if found else None

    def effect_count(self, key: str) -> int:
        with self._lock:
            return len(self.effects.get(key, []))

    def max_effects_per_key(self) -> int:
        with self._lock:
            return max((len(v) for v in self.effects.values()), default=0)

    def call_count(self) -> int:
        with self._lock:
            return self._calls_total


def _trim(records: list[Any]) -> None:
    if len(records) > MAX_RECORDS:
        del records[: len(records) - MAX_RECORDS]


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS effects (seq INTEGER PRIMARY KEY, key TEXT NOT NULL,"
    " receipt TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS effects_key ON effects (key)",
    "CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY, capability TEXT NOT NULL,"
    " key TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lookups (seq INTEGER PRIMARY KEY, key TEXT NOT NULL)",
)


class FileEffectLedger:
    """The same ledger in one SQLite file that several processes share.

    Every operation is one short transaction (``BEGIN IMMEDIATE`` for writes),
    so a check-and-apply (``once``) is atomic across processes.

    One connection per process, behind a lock, serves every thread: the worker
    calls an executor on a fresh thread each time, and a connection per thread
    meant a new connection, its own page cache and two PRAGMAs per call, with
    the connections of ended threads freed only when the collector got to them.
    A forked child opens its own (an SQLite connection must not cross a fork).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        _FILE_LEDGERS.add(self)
        with self._tx() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """The process's one connection, held under the lock for one operation."""
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            yield self._conn

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        # It plays a remote provider for development: a commit must survive the
        # process (WAL does that without a sync); a power cut may lose it.
        db.execute("PRAGMA synchronous=NORMAL")
        # The connection lives as long as the process and the file only grows: a page
        # cache of SQLite's default size (2 MiB) would fill up with it. A lookup by key
        # reads a handful of index pages, so a small cache costs nothing that matters.
        db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._db() as db:
            return db.execute(sql, args).fetchall()

    def close(self) -> None:
        """Close this process's connection (the next operation opens a new one)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    def _forget_after_fork(self) -> None:
        # The parent's connection belongs to the parent: dropped unclosed. A thread
        # of the parent may have held the lock at the fork; that thread does not
        # exist here, so the child starts with a fresh lock.
        self._lock = threading.RLock()
        self._conn = None

    def record_call(self, capability: str, key: str) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO calls (capability, key) VALUES (?, ?)", (capability, key))

    def record_lookup(self, key: str) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO lookups (key) VALUES (?)", (key,))

    def apply(self, key: str, receipt: dict[str, Any], *, once: bool = False) -> dict[str, Any]:
        with self._tx() as db:
            if once:
                row = db.execute(
                    "SELECT receipt FROM effects WHERE key = ? ORDER BY seq LIMIT 1", (key,)
                ).fetchone()
                if row is not None:
                    found: dict[str, Any] = json.loads(row[0])
                    return found
            db.execute(
                "INSERT INTO effects (key, receipt) VALUES (?, ?)",
                (key, json.dumps(receipt, sort_keys=True)),
            )
        return receipt

    def first(self, key: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT receipt FROM effects WHERE key = ? ORDER BY seq LIMIT 1", (key,))
        return dict(json.loads(rows[0][0])) if rows else None

    def effect_count(self, key: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM effects WHERE key = ?", (key,))[0][0])

    def max_effects_per_key(self) -> int:
        rows = self._rows(
            "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM effects GROUP BY key)"
        )
        return int(rows[0][0])

    def call_count(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM calls")[0][0])

    @property
    def calls(self) -> list[tuple[str, str]]:
        rows = self._rows("SELECT capability, key FROM calls ORDER BY seq")
        return [(str(c), str(k)) for c, k in rows]

    @property
    def lookups(self) -> list[str]:
        return [str(k) for (k,) in self._rows("SELECT key FROM lookups ORDER BY seq")]

    @property
    def effects(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for key, receipt in self._rows("SELECT key, receipt FROM effects ORDER BY seq"):
            found.setdefault(str(key), []).append(json.loads(receipt))
        return found


_FILE_LEDGERS: weakref.WeakSet[FileEffectLedger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for ledger in list(_FILE_LEDGERS):
        ledger._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _simulate(request: ExecutionRequest) -> str:
    value = request.spec.content.get("simulate", "success")
    return value if isinstance(value, str) else "success"


class FakeExecutor:
    """One fake capability. Provider-idempotent builds replay the first receipt."""

    def __init__(
        self,
        capability: str,
        ledger: Effects,
        clock: Clock | None = None,
        settle_seconds: float | None = None,
    ) -> None:
        self.capability = capability
        self.build_digest = fake_build_digest(capability)
        self.content_schema = fake_content_schema(capability)
        self.delivery_mode = FAKE_CAPABILITIES[capability]
        self.ledger = ledger
        self.clock = clock
        # None: the default window of its delivery mode (``worker_policy.settle_seconds``).
        self.settle_seconds = settle_seconds

    def _receipt(self, request: ExecutionRequest) -> dict[str, Any]:
        return {
            "provider_id": "fake_" + request.idempotency_key[4:20],
            "request_hash": sha256_tag(request.idempotency_key.encode()),
        }

    def _take_time(self, request: ExecutionRequest) -> bool:
        """``slow``: move the injected clock by the time the spec names; False when the
        clock cannot move (then the call is reported as timed out instead)."""
        advance = getattr(self.clock, "advance", None)
        now = getattr(self.clock, "now", None)
        if advance is None or now is None:
            return False
        named = request.spec.content.get("slow_seconds")
        if isinstance(named, int) and not isinstance(named, bool) and named >= 0:
            seconds = float(min(named, MAX_SLOW_SECONDS))
        else:
            current: datetime = now()
            seconds = max(0.0, (request.deadline - current).total_seconds()) + 1.0
        advance(seconds)
        return True

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        key = request.idempotency_key
        self.ledger.record_call(self.capability, key)
        mode = _simulate(request)
        took_time = mode == "slow" and self._take_time(request)
        idempotent = self.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY
        if mode in RESEND_REFUSALS and self.ledger.first(key) is not None:
            error, reason_code = RESEND_REFUSALS[mode]
            raise error(reason_code=reason_code)  # this request writes nothing
        if idempotent:
            previous = self.ledger.first(key)
            if previous is not None:
                return ExecutionReceipt(previous)
        if mode == "no_write_error":
            raise ExecutorNoEffect()
        if mode == "timeout_before_effect":
            raise ExecutorOutcomeUncertain()
        # The provider dedups by key at the moment it applies (a late call too).
        receipt = self.ledger.apply(key, self._receipt(request), once=idempotent)
        lost = mode == "timeout_after_effect" or mode in RESEND_REFUSALS
        if lost or (mode == "slow" and not took_time):
            raise ExecutorOutcomeUncertain()
        if mode == "unsafe_receipt":
            return ExecutionReceipt({**receipt, "api_secret": "sk_live_canary_do_not_store"})
        return ExecutionReceipt(receipt)


class FakeReconciler:
    """Read-only lookup in the effect ledger by idempotency key."""

    def __init__(self, ledger: Effects) -> None:
        self.ledger = ledger

    def lookup(self, request: ExecutionRequest) -> ReconcileAnswer:
        self.ledger.record_lookup(request.idempotency_key)
        if _simulate(request) == "lookup_unknown":
            return ReconcileAnswer("unknown")
        found = self.ledger.first(request.idempotency_key)
        if found is None:
            return ReconcileAnswer("not_applied")
        return ReconcileAnswer("applied", found)


def effect_ledger(path: str | None = None) -> EffectLedger | FileEffectLedger:
    """The in-memory ledger, or the file-backed one that processes share at ``path``."""
    return FileEffectLedger(path) if path else EffectLedger()


L = TypeVar("L", bound=Effects)


@overload
def register_fakes(
    registry: StaticExecutorRegistry,
    ledger: None = None,
    clock: Clock | None = None,
    settle_seconds: float | None = None,
) -> EffectLedger: ...


@overload
def register_fakes(
    registry: StaticExecutorRegistry,
    ledger: L,
    clock: Clock | None = None,
    settle_seconds: float | None = None,
) -> L: ...


def register_fakes(
    registry: StaticExecutorRegistry,
    ledger: Effects | None = None,
    clock: Clock | None = None,
    settle_seconds: float | None = None,
) -> Effects:
    """Register the three fake executors (and the lookup reconciler); returns the ledger.

    ``clock`` is the injected clock ``slow`` takes its time on; ``settle_seconds``
    the settle window of the ``correlation_lookup`` fake (None: its default window).
    """
    chosen: Effects = ledger if ledger is not None else EffectLedger()
    for capability, mode in FAKE_CAPABILITIES.items():
        lookup = mode is DeliveryMode.CORRELATION_LOOKUP
        reconciler = FakeReconciler(chosen) if lookup else None
        settle = settle_seconds if lookup else None
        registry.register(FakeExecutor(capability, chosen, clock, settle), reconciler)
    return chosen
