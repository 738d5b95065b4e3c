"""Who a presentation may be for (design.md 5.1): the proposal's own actor, through
a binding of its conversation on the same channel.

A presentation bound to another actor's identity binding, or to a channel
binding of another channel or conversation, can never be approved (the
approval checks the same records, I7); presenting it anyway would only use up
one of the version's ``LEDGER_MAX_ACTIVE_PRESENTATIONS`` slots and lock the
proposal's owner out. So it is refused before anything is counted or written.

Whether a binding is active is left to the approval: a binding switched off
for a while is still the actor's.
"""

from __future__ import annotations

from domain.directory import channel_binding_record_id, identity_binding_record_id
from domain.errors import InvalidInput
from domain.services.context import ServiceContext
from domain.services.read_cache import DirectorySnapshot, read_directory

NOT_THE_ACTORS = "identity_binding_id: not a binding of the proposal's actor"
NOT_THE_CONVERSATIONS = (
    "channel_binding_id: not the binding of this conversation on the identity binding's channel"
)


def check_presentation_bindings(
    ctx: ServiceContext,
    *,
    actor_id: str,
    identity_binding_id: str,
    channel_binding_id: str,
    conversation_key: str,
) -> None:
    """InvalidInput unless the identity binding is ``actor_id``'s and the channel
    binding is ``conversation_key``'s on the identity binding's channel.

    The records come from the read cache; a refusal reached on a cached record
    is judged again on a fresh read, so a binding registered a moment ago is
    never refused because of a stale entry. A missing record gets the same
    answer as another actor's (nothing tells which ids exist)."""
    try:
        _check(ctx, actor_id, identity_binding_id, channel_binding_id, conversation_key, False)
    except InvalidInput:
        if not ctx.cache.enabled:
            raise
        _check(ctx, actor_id, identity_binding_id, channel_binding_id, conversation_key, True)


def _check(
    ctx: ServiceContext,
    actor_id: str,
    identity_binding_id: str,
    channel_binding_id: str,
    conversation_key: str,
    fresh: bool,
) -> None:
    identity = _read(ctx, identity_binding_record_id(identity_binding_id), fresh)
    if identity is None or identity.text("actor_id") != actor_id:
        raise InvalidInput(NOT_THE_ACTORS)
    channel = _read(ctx, channel_binding_record_id(channel_binding_id), fresh)
    if (
        channel is None
        or channel.text("channel") != identity.text("channel")
        or channel.text("conversation_key") != conversation_key
    ):
        raise InvalidInput(NOT_THE_CONVERSATIONS)


def _read(ctx: ServiceContext, record_id: str, fresh: bool) -> DirectorySnapshot | None:
    found, _ = read_directory(ctx.store, ctx.cache, record_id, fresh=fresh)
    return found
