"""Base classes for string-identified, event-sourced aggregates, hash-chained.

The eventsourcing library's ``Aggregate`` is keyed by UUID; every stream here
has a readable, deterministic string id (``actor:alice``, ``att_<hex>``), so
the event and aggregate bases are declared once for ``str`` ids.

Tamper evidence: every event carries ``prev_hash``, the hash of its predecessor
in the same stream (the first event commits to the stream id through a genesis
hash). A changed, removed, reordered or inserted event breaks the chain when
the stream is replayed (see ``domain.audit.verify_chain``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self, TypeVar

from eventsourcing.domain import (
    BaseAggregate,
    CanCreateTimestamp,
    CanInitAggregate,
    CanMutateAggregate,
    MetaDomainEvent,
)

from domain.canonical import canonical_json
from domain.spec import format_utc

GENESIS_LABEL = "execution-ledger/genesis/v1"
HEADER_FIELDS = ("originator_id", "originator_version", "timestamp")

T = TypeVar("T")


def genesis_hash(stream_id: str) -> str:
    """What the first event of a stream names as its predecessor."""
    return "sha256:" + hashlib.sha256(canonical_json([GENESIS_LABEL, stream_id])).hexdigest()


def event_body(
    stream_id: str, version: int, event_type: str, timestamp: datetime, data: dict[str, Any]
) -> dict[str, Any]:
    """The object an event's hash is computed over; its canonical bytes are
    also the event's stored state (``adapters/mapping.py``)."""
    return {
        "stream": stream_id,
        "version": version,
        "type": event_type,
        "timestamp": format_utc(timestamp),
        "data": data,
    }


def event_hash(
    stream_id: str, version: int, event_type: str, timestamp: datetime, data: dict[str, Any]
) -> str:
    """SHA-256 of an event's canonical form (its stream, version, type, time and data)."""
    body = event_body(stream_id, version, event_type, timestamp, data)
    return bytes_hash(canonical_json(body))


def bytes_hash(canonical: bytes) -> str:
    """An event's hash from its canonical bytes."""
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class LedgerEvent(CanMutateAggregate[str], CanCreateTimestamp, metaclass=MetaDomainEvent):
    """An immutable fact appended to one stream at one version.

    Its canonical bytes are produced once (when its hash or its stored form is
    first needed) and kept beside it, outside its fields: the chain link of its
    successor, the head index and the stored state all derive from them. An
    event read back from canonical stored bytes is given those bytes, so
    hashing it again costs one SHA-256 and no encoding.
    """

    __slots__ = ("_canonical",)

    originator_id: str
    originator_version: int
    timestamp: datetime
    prev_hash: str

    def data(self) -> dict[str, Any]:
        """The event's own fields (everything but the stream/version/time header)."""
        return {k: v for k, v in vars(self).items() if k not in HEADER_FIELDS}

    def body(self) -> dict[str, Any]:
        """The exact object this event's hash is computed over."""
        return event_body(
            self.originator_id,
            self.originator_version,
            type(self).__qualname__,
            self.timestamp,
            self.data(),
        )

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of :meth:`body`, computed at most once."""
        cached: bytes | None = getattr(self, "_canonical", None)
        if cached is not None:
            return cached
        canonical = canonical_json(self.body())
        object.__setattr__(self, "_canonical", canonical)
        return canonical

    def adopt_canonical_bytes(self, canonical: bytes) -> None:
        """Keep ``canonical`` as this event's bytes: they are the stored state it
        was decoded from (see ``adapters.mapping``)."""
        object.__setattr__(self, "_canonical", canonical)

    def hash(self) -> str:
        """This event's link in the chain."""
        return bytes_hash(self.canonical_bytes())

    def mutate(self, aggregate: Any) -> Any:
        result = super().mutate(aggregate)
        assert result is not None
        result._chain_head = LazyHash(self)
        return result


class LazyHash:
    """The hash of one event, computed when first asked for.

    Replaying a stream only to read its state (the directory records of every
    authorization, an attempt before its next step) then hashes nothing; the
    hash is computed for the next event's link or the status view's anchor.
    Two of them are equal when the hashes are.
    """

    __slots__ = ("_event", "_value")

    def __init__(self, event: LedgerEvent) -> None:
        self._event = event
        self._value: str | None = None

    @property
    def value(self) -> str:
        if self._value is None:
            self._value = self._event.hash()
        return self._value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyHash):
            return self.value == other.value
        if isinstance(other, str):
            return self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class LedgerCreated(CanInitAggregate[str], LedgerEvent):
    """The first event of a stream; it names the aggregate class."""

    originator_topic: str

    def mutate(self, aggregate: Any) -> Any:
        result = CanInitAggregate.mutate(self, aggregate)
        assert result is not None
        result._chain_head = LazyHash(self)
        return result


class LedgerAggregate(BaseAggregate[str]):
    """An aggregate whose id is a string chosen by the domain."""

    _chain_head: LazyHash

    class Event(LedgerEvent):
        pass

    class Created(Event, LedgerCreated):
        pass

    @classmethod
    def _create(cls, event_class: type[Any], **kwargs: Any) -> Self:
        stream_id = kwargs.get("id") or cls.create_id(**kwargs)
        kwargs["id"] = stream_id
        kwargs["prev_hash"] = genesis_hash(stream_id)
        created: Self = super()._create(event_class, **kwargs)
        return created

    def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None:
        kwargs["prev_hash"] = self._chain_head.value
        super().trigger_event(event_class, **kwargs)

    @property
    def revision(self) -> int:
        """The stream version: what callers pass back as ``expected_revision``."""
        return self.version

    @property
    def chain_head(self) -> str:
        """The hash of the latest event applied."""
        return self._chain_head.value
