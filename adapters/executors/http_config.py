"""The ``[[http]]`` entries of the executors file (design.md 11.2): parsing and checks.

Everything that can be wrong with an entry is found here, at start-up, and
reported in one line naming the entry and the key: an unknown key, a missing
``env:`` variable, a URL without a scheme or with a placeholder where it could
change the host, a receipt pointer that could never be stored. Secret values
never appear in a message or in the build digest; the names of the variables
that hold them do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from adapters.executors.content_schema import (
    ContentSchemaError,
    LoadedContentSchema,
    load_content_schema,
    load_content_schema_file,
)
from adapters.urls import authority_problem
from domain.directory import DeliveryMode
from domain.redaction import RECEIPT_KEY, looks_secret, secret_shaped_key
from domain.services.worker_policy import default_settle_seconds
from domain.spec import NAME_PATTERN

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
ENV_REFERENCE = re.compile(r"^env:([A-Za-z_][A-Za-z0-9_]{0,127})$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,64}$")
URL_FIELDS = frozenset({"destination", "target_id"})
LOOKUP_FIELDS = URL_FIELDS | {"idempotency_key"}
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
# Headers the executor owns: a file may not set them.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection"}
)


class HttpConfigError(ValueError):
    """One problem with one ``[[http]]`` entry; the message names the key, never a value."""


class HttpEntry(BaseModel):
    """One ``[[http]]`` table, exactly as written (unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    capability: Annotated[str, Field(pattern=NAME_PATTERN)]
    delivery_mode: Annotated[DeliveryMode, Field(strict=False)]
    url: Annotated[str, Field(min_length=1, max_length=2048)]
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    idempotency_header: Annotated[str, Field(pattern=HEADER_NAME.pattern)] = "Idempotency-Key"
    timeout_seconds: Annotated[float, Field(gt=0, le=300, strict=False)] = 10.0
    headers: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    receipt: Annotated[list[str], Field(max_length=16)] = Field(default_factory=list)
    lookup_url: Annotated[str | None, Field(min_length=1, max_length=2048)] = None
    # None (not written): the default window of a correlation_lookup build, at least
    # its timeout (``effective_settle_seconds``); 0 only when written so.
    settle_seconds: Annotated[float | None, Field(ge=0, le=3600, strict=False)] = None
    max_response_bytes: Annotated[int, Field(ge=1024, le=16 * 1024 * 1024)] = 1024 * 1024
    tls_verify: bool = True
    # The JSON Schema of the spec's content, inline or in a JSON file (relative to
    # the executors file); the canonical schema is part of the build digest.
    content_schema: dict[str, Any] | None = None
    content_schema_file: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    # Build rollover: the previous entry of a capability kept beside the new one.
    # Its attempts and open presentations still run on it; new proposals are
    # refused it. Not part of the build digest: marking an entry draining keeps
    # its build.
    draining: bool = False

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


@dataclass(frozen=True)
class UrlTemplate:
    """A URL whose placeholders can only ever fill path segments or query values."""

    template: str
    fields: frozenset[str]
    host: str

    def render(self, values: Mapping[str, str]) -> str:
        def fill(match: re.Match[str]) -> str:
            return encode_value(values[match.group(1)])

        url = PLACEHOLDER.sub(fill, self.template)
        # Defence in depth: the host part holds no placeholder, so it cannot differ.
        if urlsplit(url).netloc != self.host:
            raise HttpConfigError("rendered URL changed host")
        return url


def encode_value(value: str) -> str:
    """Percent-encode every reserved character, '/' included; a value made only of
    dots is encoded too, so it can never become a '.' or '..' path segment."""
    encoded = quote(value, safe="")
    if encoded and set(encoded) == {"."}:
        encoded = "%2E" * len(encoded)
    return encoded


@dataclass(frozen=True)
class HttpExecutorConfig:
    """A checked entry: templates parsed, secrets resolved (values kept out of repr)."""

    entry: HttpEntry
    position: int
    url: UrlTemplate
    lookup_url: UrlTemplate | None
    receipt_keys: tuple[tuple[str, tuple[str, ...]], ...]  # (stored key, pointer tokens)
    header_values: tuple[tuple[str, str], ...]
    content_schema: LoadedContentSchema | None = None

    def __repr__(self) -> str:  # never the header values
        return f"HttpExecutorConfig({self.label})"

    @property
    def settle_seconds(self) -> float:
        """The build's settle window after the deadline (``Executor.settle_seconds``)."""
        return effective_settle_seconds(self.entry)

    @property
    def label(self) -> str:
        return f"[[http]] #{self.position} ({self.entry.capability})"

    def digest_config(self) -> dict[str, Any]:
        """The canonical configuration: every key as written (``draining`` aside, a
        lifecycle mark rather than configuration), secrets as ``env:NAME``, and the
        content schema itself, whether inline or from a file (the file's name is
        not part of it: moving a schema into a file keeps the build)."""
        data = self.entry.model_dump(
            mode="json", exclude={"draining", "content_schema", "content_schema_file"}
        )
        data["kind"] = "http"
        if self.content_schema is not None:
            data["content_schema"] = dict(self.content_schema.schema)
        return data


def effective_settle_seconds(entry: HttpEntry) -> float:
    """The settle window an entry gets: ``settle_seconds`` as written; when it is not
    written, for ``correlation_lookup`` at least the entry's ``timeout_seconds`` and at
    least the floor (``default_settle_seconds``), and 0 for the other modes (only a
    lookup's "not applied" waits for it)."""
    if entry.settle_seconds is not None:
        return float(entry.settle_seconds)
    if entry.delivery_mode is DeliveryMode.CORRELATION_LOOKUP:
        return default_settle_seconds(entry.timeout_seconds)
    return 0.0


def parse_template(
    text: str, allowed: frozenset[str], where: str, *, production: bool
) -> UrlTemplate:
    """Check one URL template; raise ``HttpConfigError`` naming ``where``."""
    if any(ord(ch) <= 32 or ord(ch) == 127 for ch in text):
        raise HttpConfigError(f"{where}: spaces and control characters are not allowed")
    try:
        parts = urlsplit(text)
    except ValueError:
        raise HttpConfigError(f"{where}: not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise HttpConfigError(f"{where}: needs an http:// or https:// scheme")
    if not parts.hostname or "{" in parts.netloc or "}" in parts.netloc:
        raise HttpConfigError(f"{where}: needs a fixed host (no placeholder before the path)")
    if "@" in parts.netloc:
        raise HttpConfigError(f"{where}: credentials in the URL are not allowed; use headers")
    problem = authority_problem(parts)
    if problem:
        raise HttpConfigError(f"{where}: {problem}")
    if parts.fragment:
        raise HttpConfigError(f"{where}: a fragment is not allowed")
    if production and parts.scheme != "https" and parts.hostname not in LOOPBACK_HOSTS:
        raise HttpConfigError(
            f"{where}: LEDGER_ENV=production needs https:// (plain http only to a loopback host)"
        )
    names = PLACEHOLDER.findall(text)
    leftover = PLACEHOLDER.sub("", text)
    if "{" in leftover or "}" in leftover:
        raise HttpConfigError(f"{where}: unbalanced braces")
    unknown = sorted(set(names) - allowed)
    if unknown:
        raise HttpConfigError(
            f"{where}: unknown placeholder {{{unknown[0]}}} (allowed: {', '.join(sorted(allowed))})"
        )
    return UrlTemplate(text, frozenset(names), parts.netloc)


def receipt_key(pointer: str) -> tuple[str, tuple[str, ...]]:
    """The stored key of a JSON pointer (its tokens joined by '_') and its tokens."""
    if not pointer.startswith("/") or pointer == "/":
        raise HttpConfigError(f"receipt pointer {pointer!r} must start with '/' and name a field")
    tokens = tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))
    key = "_".join(tokens).lower().replace("-", "_")
    if not RECEIPT_KEY.match(key):
        raise HttpConfigError(
            f"receipt pointer {pointer!r} gives key {key!r}, which is not "
            "a safe receipt key ([a-z][a-z0-9_]*)"
        )
    if secret_shaped_key(key):
        raise HttpConfigError(
            f"receipt pointer {pointer!r} names a secret-shaped field; receipts never keep secrets"
        )
    return key, tokens


def entry_error(exc: ValidationError) -> str:
    """``<key>: <what is wrong>`` for the first error of a config table (never its input)."""
    err = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "entry"
    message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
    return f"{where}: {message}"


def check_entry(
    raw: Any,
    position: int,
    environ: Mapping[str, str],
    *,
    production: bool,
    base_dir: Path | None = None,
) -> HttpExecutorConfig:
    """Validate one ``[[http]]`` table, resolve its ``env:`` references and load
    its content schema (a ``content_schema_file`` is relative to ``base_dir``,
    the executors file's directory)."""
    label = f"[[http]] #{position}"
    if isinstance(raw, Mapping) and isinstance(raw.get("capability"), str):
        label += f" ({raw['capability'][:64]})"
    try:
        entry = HttpEntry.model_validate(raw)
    except ValidationError as exc:
        raise HttpConfigError(f"{label}: {entry_error(exc)}") from None
    try:
        url = parse_template(entry.url, URL_FIELDS, "url", production=production)
        lookup = None
        if entry.delivery_mode is DeliveryMode.CORRELATION_LOOKUP:
            if entry.lookup_url is None:
                raise HttpConfigError("lookup_url: required for delivery_mode correlation_lookup")
            lookup = parse_template(
                entry.lookup_url, LOOKUP_FIELDS, "lookup_url", production=production
            )
            if "idempotency_key" not in lookup.fields:
                raise HttpConfigError("lookup_url: must contain {idempotency_key}")
        elif entry.lookup_url is not None:
            raise HttpConfigError("lookup_url: only for delivery_mode correlation_lookup")
        if production and not entry.tls_verify:
            raise HttpConfigError("tls_verify: LEDGER_ENV=production keeps TLS verification on")
        keys: dict[str, tuple[str, ...]] = {}
        for pointer in entry.receipt:
            key, tokens = receipt_key(pointer)
            if key in keys:
                raise HttpConfigError(f"receipt: two pointers give the key {key!r}")
            keys[key] = tokens
        headers = _resolve_headers(entry, environ)
        schema = _content_schema(entry, base_dir)
    except HttpConfigError as exc:
        raise HttpConfigError(f"{label}: {exc}") from None
    return HttpExecutorConfig(entry, position, url, lookup, tuple(keys.items()), headers, schema)


def _content_schema(entry: HttpEntry, base_dir: Path | None) -> LoadedContentSchema | None:
    if entry.content_schema is not None and entry.content_schema_file is not None:
        raise HttpConfigError("content_schema_file: give content_schema or content_schema_file")
    try:
        if entry.content_schema is not None:
            return load_content_schema(entry.content_schema, "content_schema")
        if entry.content_schema_file is not None:
            path = Path(entry.content_schema_file)
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            where = f"content_schema_file {entry.content_schema_file}"
            return load_content_schema(load_content_schema_file(path, where), where)
    except ContentSchemaError as exc:
        raise HttpConfigError(str(exc)) from None
    return None


def _resolve_headers(entry: HttpEntry, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    resolved: list[tuple[str, str]] = []
    seen = {entry.idempotency_header.lower()}
    for name, value in entry.headers.items():
        where = f"headers.{name}"
        if not HEADER_NAME.match(name):
            raise HttpConfigError(f"{where}: not a valid header name")
        if name.lower() in RESERVED_HEADERS or name.lower() in seen:
            raise HttpConfigError(f"{where}: this header is set by the executor")
        seen.add(name.lower())
        reference = ENV_REFERENCE.match(value)
        if reference is None:
            if value.startswith("env:"):
                raise HttpConfigError(f"{where}: 'env:' must be followed by a variable name")
            if secret_shaped_key(name) or looks_secret(value):
                raise HttpConfigError(
                    f"{where}: secret values must come from the "
                    'environment ("env:NAME"), not the file'
                )
            secret = value
        else:
            variable = reference.group(1)
            secret = environ.get(variable, "")
            if not secret:
                raise HttpConfigError(f"{where}: environment variable {variable} is not set")
            where = f"{where} (from {variable})"
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in secret):
            raise HttpConfigError(f"{where}: control characters are not allowed in a header")
        try:
            secret.encode("latin-1")
        except UnicodeEncodeError:
            raise HttpConfigError(f"{where}: header values must be Latin-1 text") from None
        resolved.append((name, secret))
    return tuple(resolved)
