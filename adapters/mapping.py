"""Events <-> stored events: the stored state of an event is its canonical bytes.

An event's hash is SHA-256 over the RFC 8785 bytes of its body (stream,
version, type, time and data; ``domain.base.event_body``). Those bytes are
produced once, when the event is created, and written as its stored state, so
the chain link of the next event, the head index and the stored row all come
from one encoding; reading the event back keeps the bytes beside it and its
hash costs one SHA-256, where before every read that linked or anchored a
stream encoded the event again.

Events written before this (the eventsourcing ``JSONTranscoder`` form, which
starts with the ``timestamp`` field) are still read through the library's
mapper, and their hashes are computed from their fields exactly as they were.
A canonical state found in a row it does not describe (another stream, version
or type: moved there by someone with write access) is read as that row's event
and hashed from its fields, as an event in the library's form would be; a state
that starts like a canonical body but is not one does not decode.

Both forms are turned into events by the library (``Mapper.to_domain_event``
over :class:`LedgerTranscoder`), so an event class that changes its fields
declares ``class_version`` and ``upcast_v1_v2`` (and so on) as the library
documents, and its older events, canonical or not, are upcast when read. An
upcast event keeps the bytes it was written with, and so its hash.
"""

from __future__ import annotations

import threading
from typing import Any, TypeGuard

from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
    Transcoder,
    UUIDAsHex,
)
from eventsourcing.utils import get_topic

from adapters import json_decode
from domain.base import LedgerEvent
from domain.spec import parse_utc

CANONICAL_PREFIX = b'{"data":'
"""Every canonical body starts so (its keys sorted); a library state never does."""
BODY_KEYS = frozenset({"data", "stream", "timestamp", "type", "version"})
HEADER_KEYS = frozenset({"originator_id", "originator_version", "timestamp"})


class StateMismatch(ValueError):
    """A canonical stored state that does not describe the row it is stored in."""


def make_library_transcoder() -> JSONTranscoder:
    """The library's JSON transcoder with the transcodings events were stored with."""
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DecimalAsStr())
    transcoder.register(DatetimeAsISO())
    return transcoder


def make_library_mapper() -> Mapper[str]:
    """The eventsourcing mapper events were stored with before (read path for them)."""
    return Mapper(transcoder=make_library_transcoder())


def _is_event_body(body: Any) -> TypeGuard[dict[str, Any]]:
    """A decoded canonical state has the shape of an event body: exactly its keys,
    its data an object without header fields, its time a string."""
    return (
        type(body) is dict
        and body.keys() == BODY_KEYS
        and type(body["data"]) is dict
        and type(body["timestamp"]) is str
        and HEADER_KEYS.isdisjoint(body["data"])
    )


class LedgerTranscoder(Transcoder):
    """Decodes a canonical body into the state of its event (its data and its
    time), and a state in the library's form through the library's transcoder.

    The body's claims (its stream, version and type) are not part of the
    event's state, and the library builds the event from the state alone: each
    decode leaves the claims of its body (None for the library's form) in
    ``decoded.claims``, a per-thread slot that :class:`LedgerMapper` reads
    right after, in the same call.
    """

    def __init__(self, library: JSONTranscoder) -> None:
        self.library = library
        self.decoded = threading.local()

    def encode(self, obj: Any) -> bytes:
        return self.library.encode(obj)

    def decode(self, data: bytes) -> Any:
        state = data if type(data) is bytes else bytes(data)
        if not state.startswith(CANONICAL_PREFIX):
            self.decoded.claims = None
            return self.library.decode(state)
        body = json_decode.loads(state)  # json.loads of its text, through orjson where equal
        if not _is_event_body(body):
            raise StateMismatch("the stored state is not an event body")
        self.decoded.claims = (body["stream"], body["version"], body["type"])
        event_state: dict[str, Any] = body["data"]
        event_state["timestamp"] = parse_utc(body["timestamp"])
        return event_state


class LedgerMapper(Mapper[str]):
    """Writes canonical bodies; reads canonical bodies and the library's form.

    Reading goes through the library's own construction of events
    (``Mapper.to_domain_event``), so the upcasting of events whose class has a
    higher ``class_version`` (``upcast_v1_v2``...) applies to both forms.
    """

    transcoder: LedgerTranscoder

    def __init__(self) -> None:
        self.library = make_library_mapper()
        library_transcoder = self.library.transcoder
        assert isinstance(library_transcoder, JSONTranscoder)
        super().__init__(transcoder=LedgerTranscoder(library_transcoder))

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        if (
            not isinstance(domain_event, LedgerEvent)
            or getattr(type(domain_event), "class_version", 1) != 1
            or domain_event.timestamp.year < 1000
        ):  # RFC 3339 needs four digits
            return self.library.to_stored_event(domain_event)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=get_topic(type(domain_event)),
            state=domain_event.canonical_bytes(),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        try:
            event = super().to_domain_event(stored_event)
        except MapperDeserialisationError as exc:
            if isinstance(exc.__cause__, StateMismatch):
                raise StateMismatch(
                    f"the stored state of {stored_event.originator_id} version "
                    f"{stored_event.originator_version} is not an event body"
                ) from None
            raise
        claims = self.transcoder.decoded.claims
        if claims is None:  # the library's form
            return event
        if not isinstance(event, LedgerEvent):
            raise StateMismatch(
                f"the stored state of {stored_event.originator_id} version "
                f"{stored_event.originator_version} names no ledger event"
            )
        if claims == (
            stored_event.originator_id,
            stored_event.originator_version,
            type(event).__qualname__,
        ):
            event.adopt_canonical_bytes(bytes(stored_event.state))
        # Otherwise the state was moved to another row (a reordering, an
        # insertion): the event is the row's, and its hash is computed from its
        # fields as for any event, so the audit can tell what was moved where.
        return event


def canonical_body(stored_event: StoredEvent, event_type: str) -> dict[str, Any] | None:
    """The decoded body of a canonical state that describes its own row as an
    ``event_type`` event, checked as :meth:`LedgerMapper.to_domain_event` checks
    it (its time parsed too), without building the event; None for anything
    else (a library state, a moved or malformed one, trailing bytes), which
    the caller then reads through the mapper, whose answer it gives."""
    state = stored_event.state
    if type(state) is not bytes:
        state = bytes(state)
    # A canonical body has no whitespace around it: it starts with its prefix and
    # ends with its closing brace (a state with anything after that brace is
    # not one, whatever decodes before it). The decoder is the standard one's
    # equal, through orjson where installed (adapters.json_decode).
    if not state.startswith(CANONICAL_PREFIX) or not state.endswith(b"}"):
        return None
    try:
        body = json_decode.loads(state)
        if (
            not _is_event_body(body)
            or body["stream"] != stored_event.originator_id
            or body["version"] != stored_event.originator_version
            or body["type"] != event_type
        ):
            return None
        parse_utc(body["timestamp"])
    except Exception:  # the mapper's read gives the error
        return None
    return body
