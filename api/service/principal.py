"""Who calls a service function: a role, a subject and, for a channel, provenance.

Every entry point builds one: HTTP from a verified bearer token
(``api.http.auth``), the console from an admin session, the CLI as the
operator who holds the store, the in-process API from what its host says.
The service functions enforce the role and ownership rules on it, whichever
entry point called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from api.service.roles import Role as Role
from domain.errors import Forbidden, InvalidInput, NotFound
from domain.services.approval import ChannelService, Provenance


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    A channel caller has ``provenance`` (a per-conversation credential: it
    approves for exactly that actor, bindings and conversation), ``channel``
    (a channel service registered for one channel, say ``telegram``: it
    asserts the provenance of each request, for bindings on that channel
    only), or both (its own provenance, on its channel only). Other roles
    have neither.
    """

    subject: str
    role: Role
    provenance: Provenance | None = None
    channel: str | None = None

    def require_provenance(self) -> Provenance:
        """The trusted provenance of a per-conversation credential (Forbidden otherwise)."""
        if self.provenance is None:
            raise Forbidden()
        return self.provenance

    def decision_provenance(
        self, asserted: Provenance | None
    ) -> tuple[Provenance, ChannelService | None]:
        """Who decides, and the channel service that asserted it (None when the
        credential itself carries the provenance).

        Forbidden for any role but ``channel``; InvalidInput when ``asserted`` is
        missing for a channel service or sent with a per-conversation credential.
        """
        if self.role is not Role.CHANNEL:
            raise Forbidden()
        if self.provenance is not None:
            if asserted is not None and asserted != self.provenance:
                raise InvalidInput(
                    "provenance: this credential carries its own; only a channel service "
                    "asserts one in the request"
                )
            if self.channel is None:
                return self.provenance, None
            return self.provenance, ChannelService(self.subject, self.channel)
        if self.channel is None:
            raise Forbidden()
        if asserted is None:
            raise InvalidInput("provenance: a channel service asserts it in every request")
        return asserted, ChannelService(self.subject, self.channel, asserted=True)


def require_role(principal: Principal, *roles: Role) -> Principal:
    """The principal when its role is one of ``roles``; Forbidden (403) otherwise."""
    if principal.role not in roles:
        raise Forbidden()
    return principal


# Ids this ledger hands out (``att_<hex>``, ``prop_<hex>``, ``whd_<hex>``):
# anything else names nothing, so it is the uniform NotFound before it can
# reach a store key (DynamoDB refuses keys over 2 KB) or an event.
_KNOWN_ID = re.compile(r"[A-Za-z0-9_\-]{1,80}")


def known_id(value: str) -> str:
    """An id that could exist; NotFound (the uniform 404) for any other."""
    if not _KNOWN_ID.fullmatch(value):
        raise NotFound()
    return value
