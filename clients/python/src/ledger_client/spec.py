"""Building a proposal spec from what the server hosts (``GET /executors``).

The server decides which executor build runs an effect and which schema its
content follows; the proposer decides everything else. :func:`pick_build`
takes the newest available build of a capability from the listing (it comes
newest first per capability) and :func:`make_spec` fills ``executor_build``
and ``schema_digest`` from it. The two other digests are the proposer's own
(:class:`SpecDigests`) and have no default here: each is a
``sha256:<64 hex>`` of something the proposer holds (the build of the code
that proposes, the policy it applied; the project's design document says
what each binds), and all of them are inside the payload hash, so an
approval is bound to exactly those values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger_client.answers import ExecutorListOut, ExecutorOut
from ledger_client.errors import NoAvailableBuild
from ledger_client.requests import ProposalSpec, Target

DEFAULT_EXPIRES_IN = timedelta(hours=24)
"""How long a spec stays approvable when no ``expires_at`` is given."""


@dataclass(frozen=True)
class SpecDigests:
    """The digests a proposer binds into each spec, each ``sha256:<64 hex>``.

    ``plugin_build`` and ``policy_digest`` are the proposer's to compute; the
    ledger takes them as given and puts them inside the payload hash and the
    preview, so an approval is bound to exactly these values (the project's
    design document says what each binds and who computes it).
    """

    plugin_build: str
    """The build of the code that proposes (the assistant's own build)."""
    policy_digest: str
    """The policy the proposer applied in deciding to propose."""
    schema_digest: str | None = None
    """The content schema the proposer wrote its content for. None (the
    default): the build's, as ``GET /executors`` lists it. Given, it is sent
    as is, so a build whose schema changed since is refused (422
    ``invalid_spec`` at ``/spec/schema_digest``) instead of taking content
    written for another schema."""


def sha256_digest(data: bytes | str) -> str:
    """``sha256:<64 hex>`` of some bytes (a text as UTF-8): the form of every digest field."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def pick_build(listing: ExecutorListOut | Iterable[ExecutorOut], capability: str) -> ExecutorOut:
    """The newest available build of ``capability``; :class:`NoAvailableBuild` when none is."""
    items = listing.items if isinstance(listing, ExecutorListOut) else list(listing)
    hosted = [item for item in items if item.capability == capability]
    for item in hosted:  # newest first
        if item.available:
            return item
    why = "the directory allows none of its builds" if hosted else "the server hosts no build of it"
    raise NoAvailableBuild(f"capability {capability!r}: {why}")


def utc_text(moment: datetime | str) -> str:
    """RFC 3339 in UTC with ``Z``, as the server stores it; a string is sent as given."""
    if isinstance(moment, str):
        return moment
    if moment.tzinfo is None:
        raise ValueError("expires_at: give a timezone-aware datetime")
    text = moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return text


def make_spec(
    build: ExecutorOut,
    content: Mapping[str, Any],
    *,
    permission: str,
    effect: str,
    destination: str,
    digests: SpecDigests,
    sources: Iterable[str] = (),
    target: Target | None = None,
    expires_at: datetime | str | None = None,
    now: datetime | None = None,
) -> ProposalSpec:
    """A spec on ``build``: its capability, exact build digest and schema digest."""
    if expires_at is None:
        expires_at = (now or datetime.now(UTC)) + DEFAULT_EXPIRES_IN
    return ProposalSpec(
        capability=build.capability,
        executor_build=build.executor_build,
        plugin_build=digests.plugin_build,
        schema_digest=digests.schema_digest or build.schema_digest,
        policy_digest=digests.policy_digest,
        permission=permission,
        effect=effect,
        destination=destination,
        content=dict(content),
        sources=list(sources),
        expires_at=utc_text(expires_at),
        target=target,
    )
