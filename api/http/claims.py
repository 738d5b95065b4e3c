"""From a verified token's claims to a principal: which claims say what.

The role and the subject are read from configurable claims
(``LEDGER_AUTH_ROLE_CLAIM``, ``LEDGER_AUTH_SUBJECT_CLAIM``): a claim name, or a
dotted path into nested claims (``realm_access.roles``; a name that exists as
a top-level claim, such as ``https://example.com/roles``, is taken whole
first). A role claim may be one string or a list: a list must hold exactly
one of the ledger's role names (the provider's other roles are ignored).

A ``channel`` principal is one of two kinds:

- a per-conversation token carries the four provenance claims (actor,
  identity binding, channel binding, conversation), and approves only that;
- a channel service is registered for one channel, by a ``channel`` claim
  (``LEDGER_AUTH_CHANNEL_CLAIM``) or by its subject in
  ``LEDGER_AUTH_CHANNEL_SERVICES``, so an identity provider can issue its
  token without any per-conversation claim; it asserts the provenance in each
  request, and only bindings on its own channel are accepted.

A token with both approves only its own provenance, and only on its channel;
a channel token with neither is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from api.service.principal import Principal, Role
from domain.directory import validate_ident
from domain.errors import InvalidInput
from domain.services.approval import Provenance
from domain.spec import hidden_character

MAX_SUBJECT_CHARS = 256
MAX_CONVERSATION_KEY_CHARS = 256
PROVENANCE_CLAIMS = ("actor_id", "identity_binding_id", "channel_binding_id", "conversation_key")
CHANNEL_NAME = re.compile(r"[a-z][a-z0-9_.\-]{0,63}")
_ABSENT = object()


@dataclass(frozen=True)
class ClaimRules:
    """Where a token's role, subject and channel are, and who is a channel service."""

    role_claim: str = "role"
    subject_claim: str = "sub"
    channel_claim: str = "channel"
    channel_services: Mapping[str, str] = field(default_factory=dict)


DEFAULT_RULES = ClaimRules()


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    """The claim named ``path``, else the one its dots lead to; ``_ABSENT`` when neither."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def put_claim(claims: dict[str, Any], path: str, value: Any) -> None:
    """Write ``value`` where :func:`claim_at` reads ``path`` (nested for a dotted path)."""
    parts = path.split(".")
    target = claims
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def plain_text(value: Any, name: str, max_chars: int) -> str:
    """A string claim that may reach an event, a view or a log line: 1..max_chars
    of valid Unicode with no control, bidi, zero-width or unassigned character."""
    if not isinstance(value, str) or not 1 <= len(value) <= max_chars:
        raise InvalidInput(f"{name}: must be 1..{max_chars} characters")
    if hidden_character(value):  # also catches lone surrogates (category Cs)
        raise InvalidInput(f"{name}: must not contain control, bidi or zero-width characters")
    return value


def check_provenance(values: Mapping[str, Any]) -> Provenance:
    """Validate the four provenance values; raises InvalidInput naming the first bad one."""
    missing = [name for name in PROVENANCE_CLAIMS if values.get(name) is None]
    if missing:
        raise InvalidInput(f"provenance needs {', '.join(missing)}")
    return Provenance(
        actor_id=validate_ident(values["actor_id"], "actor_id"),
        identity_binding_id=validate_ident(values["identity_binding_id"], "identity_binding_id"),
        channel_binding_id=validate_ident(values["channel_binding_id"], "channel_binding_id"),
        conversation_key=plain_text(
            values["conversation_key"], "conversation_key", MAX_CONVERSATION_KEY_CHARS
        ),
    )


def role_from(claims: Mapping[str, Any], rules: ClaimRules) -> Role:
    """The one ledger role the role claim names (a string, or a list holding exactly one)."""
    value = claim_at(claims, rules.role_claim)
    names = {r.value for r in Role}
    if isinstance(value, str):
        found = [value] if value in names else []
    elif isinstance(value, list):
        found = list(dict.fromkeys(v for v in value if isinstance(v, str) and v in names))
    else:
        found = []
    if len(found) != 1:
        raise InvalidInput(f"{rules.role_claim}: must name exactly one of {', '.join(Role)}")
    return Role(found[0])


def _channel_of(claims: Mapping[str, Any], subject: str, rules: ClaimRules) -> str | None:
    claimed = claim_at(claims, rules.channel_claim)
    registered = rules.channel_services.get(subject)
    if claimed is _ABSENT:
        return registered
    if not isinstance(claimed, str) or not CHANNEL_NAME.fullmatch(claimed):
        raise InvalidInput(f"{rules.channel_claim}: not a channel name")
    if registered is not None and registered != claimed:
        raise InvalidInput(f"{rules.channel_claim}: not the channel this subject is registered for")
    return claimed


def caller_from_claims(claims: Mapping[str, Any], rules: ClaimRules = DEFAULT_RULES) -> Principal:
    """Build a principal from verified claims; raises InvalidInput when they are unusable."""
    subject = plain_text(claim_at(claims, rules.subject_claim), "sub", MAX_SUBJECT_CHARS)
    role = role_from(claims, rules)
    if role is not Role.CHANNEL:
        return Principal(subject=subject, role=role)
    carried = any(claims.get(name) is not None for name in PROVENANCE_CLAIMS)
    channel = _channel_of(claims, subject, rules)
    if not carried and channel is None:
        raise InvalidInput(
            "a channel token needs the provenance claims "
            f"({', '.join(PROVENANCE_CLAIMS)}) or a channel"
        )
    provenance = check_provenance(claims) if carried else None
    return Principal(subject=subject, role=role, provenance=provenance, channel=channel)
