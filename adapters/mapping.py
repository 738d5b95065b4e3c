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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeGuard

from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Mapper,
    StoredEvent,
    UUIDAsHex,
)
from eventsourcing.utils import get_topic, resolve_topic

from domain.base import LedgerEvent
from domain.spec import parse_utc

CANONICAL_PREFIX = b'{"data":'
"""Every canonical body starts so (its keys sorted); a library state never does."""
BODY_KEYS = frozenset({"data", "stream", "timestamp", "type", "version"})
HEADER_KEYS = frozenset({"originator_id", "originator_version", "timestamp"})
_decode = json.JSONDecoder().decode
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""(value, end) of the JSON value at an index: the decoder's C scanner, without
the two whitespace matches around it that ``decode`` adds."""


class StateMismatch(ValueError):
    """A canonical stored state that does not describe the row it is stored in."""


def make_library_mapper() -> Mapper[str]:
    """The eventsourcing mapper events were stored with before (read path for them)."""
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DecimalAsStr())
    transcoder.register(DatetimeAsISO())
    return Mapper(transcoder=transcoder)


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


class LedgerMapper(Mapper[str]):
    """Writes canonical bodies; reads canonical bodies and the library's form."""

    def __init__(self) -> None:
        self.library = make_library_mapper()
        super().__init__(transcoder=self.library.transcoder)

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
        state = bytes(stored_event.state)
        if not state.startswith(CANONICAL_PREFIX):
            return self.library.to_domain_event(stored_event)
        cls = resolve_topic(stored_event.topic)
        body = _decode(state.decode("utf-8"))
        if not _is_event_body(body) or not issubclass(cls, LedgerEvent):
            raise StateMismatch(
                f"the stored state of {stored_event.originator_id} version "
                f"{stored_event.originator_version} is not an event body"
            )
        event_state: dict[str, Any] = body["data"]
        event_state["timestamp"] = parse_utc(body["timestamp"])
        event_state["originator_id"] = stored_event.originator_id
        event_state["originator_version"] = stored_event.originator_version
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", event_state)
        if (
            body["stream"] == stored_event.originator_id
            and body["version"] == stored_event.originator_version
            and body["type"] == cls.__qualname__
        ):
            event.adopt_canonical_bytes(state)
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
    if not state.startswith(CANONICAL_PREFIX):
        return None
    try:
        text = state.decode("utf-8")
        body, end = _scan(text, 0)  # one scan: a canonical body has no whitespace
        if (
            end != len(text)
            or not _is_event_body(body)
            or body["stream"] != stored_event.originator_id
            or body["version"] != stored_event.originator_version
            or body["type"] != event_type
        ):
            return None
        parse_utc(body["timestamp"])
    except Exception:  # the mapper's read gives the error
        return None
    return body
