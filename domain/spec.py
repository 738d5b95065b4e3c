"""ProposalSpec, its canonical bytes (RFC 8785) and every hash derived from it.

Same meaning gives the same bytes whatever the key order or Unicode form:
strings are NFC-normalized, timestamps are UTC RFC 3339 with ``Z``, numbers in
``content`` must be integers within +-(2**53 - 1) (decimals travel as strings)
and absent optional fields are omitted, never ``null``.
"""

from __future__ import annotations

import hashlib
import threading
import unicodedata
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from domain.canonical import canonical_json
from domain.errors import InvalidSpec

MAX_SAFE_INT = 2**53 - 1
MAX_CONTENT_BYTES = 16 * 1024
MAX_CONTENT_DEPTH = 8
MAX_CONTENT_NODES = 1024
MAX_CONTENT_KEY_CHARS = 128
MAX_CONTENT_STRING_CHARS = 8192

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
NAME_PATTERN = r"^[a-z][a-z0-9_.\-]{0,63}$"


def _nfc_text(value: str) -> str:
    # A lone surrogate (legal in a JSON escape) has no UTF-8 form, so it could
    # never be canonicalized: reject it here, with the field's name.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("strings must be valid Unicode (no lone surrogates)") from None
    return unicodedata.normalize("NFC", value)


def nfc(value: Any) -> Any:
    """NFC-normalize a string; leave anything else for the type check to reject."""
    if isinstance(value, str):
        return _nfc_text(value)
    return value


# Control (Cc), format (Cf: bidi controls, zero-width characters, BOM),
# surrogate (Cs), private-use (Co), unassigned (Cn) and line/paragraph
# separators: invisible or reordering in a log line, a preview or an audit
# timeline, so two ids that look the same could differ. No id may hold one.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def hidden_character(value: str) -> bool:
    """True when ``value`` holds a control, bidi, zero-width or unassigned character."""
    return any(unicodedata.category(ch) in _HIDDEN_CATEGORIES for ch in value)


def plain_id(value: Any) -> Any:
    """NFC-normalize an id-like string and refuse hidden characters in it."""
    if isinstance(value, str):
        if hidden_character(value):
            raise ValueError(
                "ids may not contain control, bidi, zero-width, "
                "private-use or unassigned characters"
            )
        return _nfc_text(value)
    return value


def format_utc(moment: datetime) -> str:
    """UTC RFC 3339 with ``Z``; fractional seconds only when present."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a timezone")
    m = moment.astimezone(UTC)
    # What strftime("%Y-%m-%dT%H:%M:%S") writes (the year unpadded, as glibc
    # does), at a fraction of its cost: every event body formats its time.
    text = f"{m.year}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    if m.microsecond:
        text += f".{m.microsecond:06d}".rstrip("0")
    return text + "Z"


_OUT_OF_RANGE = "timestamps must fall within the years 0001..9999 once converted to UTC"


def _to_utc(moment: datetime) -> datetime:
    """The same instant in UTC; ValueError (not OverflowError) when that leaves
    the calendar, e.g. ``9999-12-31T23:59:59-01:00``."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(_OUT_OF_RANGE) from None


def parse_utc(text: str) -> datetime:
    """Inverse of :func:`format_utc` (accepts any RFC 3339 offset); ValueError when
    the text is not a timestamp with a timezone or leaves the calendar in UTC."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a timezone")
    return _to_utc(moment)


Text = Annotated[str, BeforeValidator(nfc)]
Digest = Annotated[str, BeforeValidator(nfc), Field(pattern=DIGEST_PATTERN)]
Name = Annotated[str, BeforeValidator(nfc), Field(pattern=NAME_PATTERN)]
Ref = Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=256)]
UtcTimestamp = Annotated[AwareDatetime, AfterValidator(_to_utc)]


def _normalize_content(value: Any, depth: int, budget: list[int]) -> Any:
    """Validate and NFC-normalize bounded JSON; reject floats and huge integers."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(f"content has more than {MAX_CONTENT_NODES} values")
    if depth > MAX_CONTENT_DEPTH:
        raise ValueError(f"content is nested deeper than {MAX_CONTENT_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            raise ValueError("content integers must be within +-(2^53-1)")
        return value
    if isinstance(value, float):
        raise ValueError("content numbers must be integers; send decimals as strings")
    if isinstance(value, str):
        # Measured after normalization, so the NFD spelling of a string is
        # accepted exactly when its NFC spelling is.
        text = _nfc_text(value)
        if len(text) > MAX_CONTENT_STRING_CHARS:
            raise ValueError(f"content strings are limited to {MAX_CONTENT_STRING_CHARS} chars")
        return text
    if isinstance(value, list | tuple):
        return [_normalize_content(item, depth + 1, budget) for item in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("content keys must be strings")
            norm_key = _nfc_text(key)
            if not norm_key or len(norm_key) > MAX_CONTENT_KEY_CHARS:
                raise ValueError(f"content keys must be 1..{MAX_CONTENT_KEY_CHARS} chars")
            if norm_key in out:
                raise ValueError("content has keys that are equal after NFC normalization")
            out[norm_key] = _normalize_content(item, depth + 1, budget)
        return out
    raise ValueError(f"content values must be JSON; got {type(value).__name__}")


class Target(BaseModel):
    """The canonical target of an effect and the revision the proposal was based on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Ref
    base_revision: Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=128)]


class ProposalSpec(BaseModel):
    """The normalized, complete description of exactly one external effect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capability: Name
    executor_build: Digest
    plugin_build: Digest
    schema_digest: Digest
    policy_digest: Digest
    permission: Name
    effect: Name
    target: Target | None = None
    destination: Ref
    content: dict[str, Any]
    sources: Annotated[list[Ref], Field(max_length=64)]
    expires_at: UtcTimestamp

    @field_validator("content", mode="before")
    @classmethod
    def _check_content(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("content must be a JSON object")
        normalized = _normalize_content(value, 0, [MAX_CONTENT_NODES])
        if len(canonical_json(normalized)) > MAX_CONTENT_BYTES:
            raise ValueError(f"content is larger than {MAX_CONTENT_BYTES} bytes")
        return normalized

    def canonical_dict(self) -> dict[str, Any]:
        """The normalized JSON-ready mapping: optional fields omitted, UTC ``Z`` times."""
        data = self.model_dump(mode="python", exclude_none=True)
        data["expires_at"] = format_utc(self.expires_at)
        return data


def parse_spec(data: Any) -> ProposalSpec:
    """Validate untrusted input into a spec, raising one clear domain error."""
    try:
        return ProposalSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidSpec(describe_validation_error(exc)) from exc


def describe_validation_error(exc: ValidationError) -> str:
    """A short, safe summary: field locations and messages, never input values."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:5]:
        loc, msg = err["loc"], err["msg"]
        if err["type"] == "extra_forbidden":
            # The unknown key is caller input (it may be secret-shaped): name
            # only where it was found.
            loc, msg = loc[:-1], "unknown field is not permitted"
        location = ".".join(str(p) for p in loc) or "body"
        parts.append(f"{location}: {msg}")
    return "; ".join(parts)


def canonical_bytes(spec: ProposalSpec) -> bytes:
    """RFC 8785 canonical bytes of the normalized spec."""
    return canonical_json(spec.canonical_dict())


def sha256_tag(data: bytes) -> str:
    """``sha256:`` followed by the hex digest of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def payload_hash(spec: ProposalSpec) -> str:
    """The hash every approval is bound to."""
    return sha256_tag(canonical_bytes(spec))


# Specs this process has validated, by payload hash. A stored spec is immutable
# and was validated when it was proposed; reading it back, the approval and the
# pre-dispatch recheck need the model again. When the stored JSON hashes to the
# expected payload hash and that hash is here, the stored bytes are exactly the
# canonical bytes of a spec this code validated (validation depends on nothing
# but the bytes), so validating them once more would decide nothing new.
# Anything else (another process, an evicted entry, bytes that hash otherwise)
# is validated in full. Bounded: the oldest entries go first.
_VALIDATED_MAX = 256
_validated: OrderedDict[str, ProposalSpec] = OrderedDict()
_validated_lock = threading.Lock()


def validated_payload_hash(spec: ProposalSpec) -> str:
    """``payload_hash(spec)`` of a spec just validated, remembered for :func:`stored_spec`."""
    tag = payload_hash(spec)
    with _validated_lock:
        _validated[tag] = spec
        _validated.move_to_end(tag)
        while len(_validated) > _VALIDATED_MAX:
            _validated.popitem(last=False)
    return tag


def stored_spec(data: Any, expected_hash: str) -> ProposalSpec | None:
    """The stored spec ``data`` whose approved payload hash is ``expected_hash``.

    None when the spec's payload hash is not ``expected_hash``; InvalidSpec when
    the stored data is not a valid spec. Validated once per process: see above.
    """
    try:
        tag = sha256_tag(canonical_json(data))
    except (TypeError, ValueError, RecursionError):
        tag = None  # not even JSON: the full validation below says what is wrong
    if tag == expected_hash:
        with _validated_lock:
            known = _validated.get(tag)
        if known is not None:
            return known
    spec = parse_spec(data)
    if validated_payload_hash(spec) != expected_hash:
        return None
    return spec


def view_hash(payload_hash_: str, renderer_build: str, text: str) -> str:
    """Hash of the view envelope, so the preview is bound to the whole payload."""
    envelope = {
        "payload_hash": payload_hash_,
        "renderer_build": renderer_build,
        "text": unicodedata.normalize("NFC", text),
    }
    return sha256_tag(canonical_json(envelope))


ATTEMPT_ID_PREFIX = "att_"
"""Every attempt stream id starts with this; stores, feeds and filters rely on it."""
ATTEMPT_ID_LABEL = "execution-ledger/attempt-id/v1"
IDEMPOTENCY_KEY_LABEL = "execution-ledger/idempotency-key/v1"


def _derive(label: str, proposal_id: str, version: int, payload_hash_: str) -> str:
    material = canonical_json([label, proposal_id, version, payload_hash_])
    return hashlib.sha256(material).hexdigest()


def derive_attempt_id(proposal_id: str, version: int, payload_hash_: str) -> str:
    """Deterministic attempt id for one approved proposal version."""
    return ATTEMPT_ID_PREFIX + _derive(ATTEMPT_ID_LABEL, proposal_id, version, payload_hash_)


def derive_idempotency_key(proposal_id: str, version: int, payload_hash_: str) -> str:
    """Deterministic provider idempotency key; a different label from the attempt id."""
    return "idk_" + _derive(IDEMPOTENCY_KEY_LABEL, proposal_id, version, payload_hash_)
