"""The ports the domain needs. Adapters implement them; tests fake them.

The store port is the *commit API*: append the new events of several
aggregates atomically, each with its version check, together with read-set
checks ("this record is still at version N"), create-only lookup items (the
token-hash index) and due-work entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from domain.base import LedgerAggregate, LedgerEvent
from domain.directory import DeliveryMode
from domain.problems import FieldProblem
from domain.spec import ProposalSpec

A = TypeVar("A", bound=LedgerAggregate)


class Clock(Protocol):
    """Source of the current time (timezone-aware UTC)."""

    def now(self) -> datetime: ...


class TokenSource(Protocol):
    """Source of secrets and random ids."""

    def new_token(self) -> str:
        """A fresh opaque token with at least 256 bits of entropy."""
        ...

    def new_id(self, prefix: str) -> str:
        """A fresh random identifier such as ``prop_<hex>``."""
        ...


class Renderer(Protocol):
    """Renders the human preview of a spec; must be deterministic."""

    build: str

    def render(self, spec: ProposalSpec) -> str: ...


@dataclass(frozen=True)
class ExecutionRequest:
    """Everything an executor receives: the stored spec and nothing else (I4)."""

    spec: ProposalSpec
    attempt_id: str
    idempotency_key: str
    deadline: datetime


@dataclass(frozen=True)
class ExecutionReceipt:
    """What an executor returns on success; validated before it is stored."""

    data: Mapping[str, Any]


class Executor(Protocol):
    """Performs one external effect for one capability and exact build.

    The contract on time: ``execute`` must finish by ``request.deadline``; the
    worker stops waiting there and treats the call as ambiguous. A build whose
    calls can still land a little after the deadline (a request already on the
    wire) declares that window as an optional ``settle_seconds: float``
    attribute (read with ``getattr``, default 0.0): a read-only lookup's "not
    applied" is trusted only once the deadline plus that window has passed.

    The contract on answers: raise ``ExecutorNoEffect`` only when the provider
    proved that this request wrote nothing, and ``ExecutorKeyReused`` when it
    refused the request because the idempotency key was used before. Either
    proves no effect only on an attempt's first dispatch; on a re-send the
    earlier dispatch may have landed, and the answer is ambiguous.
    """

    capability: str
    build_digest: str
    delivery_mode: DeliveryMode

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt: ...


@dataclass(frozen=True)
class ReconcileAnswer:
    """A read-only lookup's verdict: ``applied``, ``not_applied`` or ``unknown``."""

    verdict: str
    receipt: Mapping[str, Any] | None = None


class Reconciler(Protocol):
    """Read-only lookup of an effect by idempotency key."""

    def lookup(self, request: ExecutionRequest) -> ReconcileAnswer: ...


class ContentSchema(Protocol):
    """The JSON Schema a build declares for the spec's ``content`` (design.md 2.1).

    ``digest`` is the spec's ``schema_digest`` for that build: ``sha256:`` over
    the RFC 8785 bytes of the schema (``domain.spec.content_schema_digest``)."""

    @property
    def digest(self) -> str:
        """The spec's ``schema_digest`` for this build (read-only)."""
        ...

    def problems(self, content: Mapping[str, Any], prefix: str) -> list[FieldProblem]:
        """Every way ``content`` fails the schema, as pointers under ``prefix``;
        the messages never repeat the content."""
        ...


class ExecutorRegistry(Protocol):
    """Executors keyed by (capability, exact build digest): the builds this process
    hosts. A capability may have several at once (a rollover); a draining one runs
    what is already bound to it and is refused to new proposals."""

    def get(self, capability: str, build_digest: str) -> Executor | None: ...

    def reconciler(self, capability: str, build_digest: str) -> Reconciler | None: ...

    def is_draining(self, capability: str, build_digest: str) -> bool: ...

    def content_schema(self, capability: str, build_digest: str) -> ContentSchema | None:
        """The build's content schema; None when it declares none (any object)."""
        ...


@dataclass(frozen=True)
class Lookup:
    """A create-only unique item written in the same commit (e.g. a token hash).

    ``expires_at``: read after it, the item is absent (and swept away later);
    ``now``: when it is written, so an expired item of the same key is replaced
    instead of clashing (a key reused after it was forgotten)."""

    key: str
    value: Mapping[str, str]
    expires_at: datetime | None = None
    now: datetime | None = None


@dataclass(frozen=True)
class DueWork:
    """A due-work entry: recovery looks at ``attempt_id`` once ``next_action_at`` passes.

    ``next_action_at=None`` removes the entry.
    """

    attempt_id: str
    next_action_at: datetime | None


@dataclass(frozen=True)
class DuePage:
    """One page of due work, oldest first, and the cursor for the next page."""

    items: Sequence[DueWork]
    cursor: str | None = None


@dataclass(frozen=True)
class StreamHead:
    """Where a stream stands: its version and the hash of its newest event.

    The head index keeps one per stream, written in the commit that moves it.
    """

    stream_id: str
    version: int
    head: str


@dataclass(frozen=True)
class ReadCheck:
    """Commit only if ``stream_id`` is still at ``version`` (0: does not exist)."""

    stream_id: str
    version: int


@dataclass
class Commit:
    """One atomic unit of work.

    ``durable`` (the default) asks the store to make the commit survive a power
    cut before it returns: every commit whose answer reaches a caller or that
    precedes an external call. A commit that can be lost without harm (a lease,
    a requeue, a rebuilt due entry: recovery redoes it) passes False, and is
    made durable by the next durable commit (docs/durability.md).
    """

    aggregates: Sequence[LedgerAggregate] = ()
    read_set: Sequence[ReadCheck] = ()
    lookups: Sequence[Lookup] = ()
    due: Sequence[DueWork] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    durable: bool = True


class EventStore(Protocol):
    """Loads aggregates and commits their new events atomically."""

    def get(self, cls: type[A], stream_id: str) -> A | None:
        """The aggregate rebuilt from its stream, or None when the stream is empty."""
        ...

    def commit(self, commit: Commit) -> None:
        """Append every pending event, check the read set, write lookups and due work.

        All or nothing. Raises ``ConcurrencyConflict`` naming the stream on a
        version clash or changed read-set record, ``LookupConflict`` when a
        create-only lookup exists, ``CommitTooLarge`` or ``StoreUnavailable``.
        """
        ...

    def get_lookup(self, key: str, *, now: datetime | None = None) -> Mapping[str, str] | None:
        """A lookup item by key (strongly consistent); with ``now``, an item
        that has expired by then is absent."""
        ...

    def events_at(self, keys: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], LedgerEvent]:
        """The events at exact (stream, version) slots, strongly consistent, in as
        few requests as the backend allows; a slot with no event is left out."""
        ...

    def latest_events(self, stream_ids: Sequence[str]) -> Mapping[str, LedgerEvent]:
        """The newest event of each stream, strongly consistent, in as few requests
        as the backend allows; a stream with no events is left out."""
        ...

    def stream_versions(self, stream_ids: Sequence[str]) -> Mapping[str, int]:
        """The version of each stream, strongly consistent, in as few requests as the
        backend allows; a stream with no events is left out. Only for streams
        whose every commit moves their head (a standing grant's use shards)."""
        ...

    def grant_use_shards(self) -> int:
        """How many use shards a standing grant made now gets (0: its uses are
        counted on its own record, as before use shards)."""
        ...

    def audit_events(self, stream_id: str) -> tuple[list[LedgerEvent], int | None]:
        """A stream's events in version order, decoded one by one for an audit.

        Stops at the first stored event that cannot be decoded (a tampered one)
        and returns its version as the second element; None when all decoded.
        """
        ...

    def due_work(self, now: datetime, limit: int, cursor: str | None = None) -> DuePage:
        """Due-work entries with ``next_action_at <= now``, oldest first, paginated."""
        ...
