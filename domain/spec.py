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
from collections.abc import Mapping
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
from domain.problems import from_pydantic, summary

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


DESCRIPTIONS: dict[str, str] = {
    "capability": "The capability that carries the effect out: a build's `capability` in "
    "`GET /executors`.",
    "executor_build": "The exact executor build that carries the effect out: `sha256:` over "
    "the build's code identity and its canonical configuration, its content schema included "
    "(design.md 11.1). The ledger computes it at start-up; the proposer copies it from "
    "`GET /executors` (`executor_build` of a `current` build the directory allows). A changed "
    "configuration or content schema is a new build.",
    "plugin_build": "The build of the proposing assistant (the plugin, tool or release that "
    "wrote this proposal): `sha256:` of whatever identifies that build exactly, computed by the "
    "proposer, for example over its release artifact or its name and version. The ledger does "
    "not interpret it: it is bound into the payload and view hashes, shown in the preview and "
    "recorded, so the audit trail says which assistant build proposed what was approved.",
    "schema_digest": "`sha256:` over the RFC 8785 bytes of the content schema of the named "
    "executor build (over `{}` when the build declares none). `GET /executors` publishes it as "
    "`schema_digest`; the proposer copies it from there (or computes it from "
    "`content_schema`). Checked at propose: another value is a 422 `invalid_spec` naming "
    "`/spec/schema_digest`, so a proposal is always written against the schema its build holds.",
    "policy_digest": "Reserved: the digest of the version of the policy set the proposal was "
    "evaluated under. Nothing evaluates policies yet, so until they land any well-formed "
    "`sha256:<64 hex>` value is accepted (it is bound into the hashes like every field).",
    "permission": "The core permission the effect needs (one of LEDGER_PERMISSIONS). The "
    "actor must hold it in the directory: checked at propose (422 `permission_not_granted`), "
    "at approval and again before dispatch.",
    "effect": "What kind of change it is (`create`, `update`, `delete`...): a lowercase name.",
    "target": "The existing record the effect changes and the revision the proposal was "
    "based on; omit it for an effect that creates something new.",
    "destination": "Where the effect goes (a list, a channel...); the `http` executor puts it "
    "in its URL as `{destination}`.",
    "content": "The effect's payload: a JSON object of at most 16 KiB canonical, 8 levels and "
    "1,024 values, integers only (decimals as strings). Validated against the build's content "
    "schema (`content_schema` in `GET /executors`): a 422 names every failing field by its "
    "JSON pointer.",
    "sources": "References to what the proposal came from (message ids...), at most 64.",
    "expires_at": "When the proposal lapses: RFC 3339 with an offset, stored in UTC with `Z`; "
    "must be in the future.",
}
"""The OpenAPI descriptions of the spec's fields (what each binds, who computes it)."""


class Target(BaseModel):
    """The canonical target of an effect and the revision the proposal was based on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Ref
    base_revision: Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=128)]


class ProposalSpec(BaseModel):
    """The normalized, complete description of exactly one external effect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capability: Annotated[Name, Field(description=DESCRIPTIONS["capability"])]
    executor_build: Annotated[Digest, Field(description=DESCRIPTIONS["executor_build"])]
    plugin_build: Annotated[Digest, Field(description=DESCRIPTIONS["plugin_build"])]
    schema_digest: Annotated[Digest, Field(description=DESCRIPTIONS["schema_digest"])]
    policy_digest: Annotated[Digest, Field(description=DESCRIPTIONS["policy_digest"])]
    permission: Annotated[Name, Field(description=DESCRIPTIONS["permission"])]
    effect: Annotated[Name, Field(description=DESCRIPTIONS["effect"])]
    target: Annotated[Target | None, Field(description=DESCRIPTIONS["target"])] = None
    destination: Annotated[Ref, Field(description=DESCRIPTIONS["destination"])]
    content: Annotated[dict[str, Any], Field(description=DESCRIPTIONS["content"])]
    sources: Annotated[list[Ref], Field(max_length=64, description=DESCRIPTIONS["sources"])]
    expires_at: Annotated[UtcTimestamp, Field(description=DESCRIPTIONS["expires_at"])]

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


def parse_spec(data: Any, prefix: str = "") -> ProposalSpec:
    """Validate untrusted input into a spec, raising one clear domain error that
    names every failing field (as pointers under ``prefix``, e.g. ``/spec``)."""
    try:
        return ProposalSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidSpec(problems=from_pydantic(exc.errors(include_input=False), prefix)) from exc


def describe_validation_error(exc: ValidationError) -> str:
    """A safe summary of every failing field: locations and messages, never input values."""
    return summary(from_pydantic(exc.errors(include_input=False)), "The input is not valid.")


NO_CONTENT_SCHEMA: dict[str, Any] = {}
"""The content schema of a build that declares none: every JSON object is valid."""


def content_schema_digest(schema: Mapping[str, Any]) -> str:
    """A spec's ``schema_digest``: ``sha256:`` over the RFC 8785 bytes of the
    content schema of its executor build (``{}`` for a build that declares none)."""
    return sha256_tag(canonical_json(dict(schema)))


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
