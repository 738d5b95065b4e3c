"""Python client of the execution ledger's HTTP API.

    from ledger_client import Client

    with Client("http://127.0.0.1:8000", token=proposer_token) as ledger:
        digests = SpecDigests(plugin_build=..., policy_digest=...)
        spec = ledger.build_spec("tasks.create", {"title": "Buy milk"}, permission="tasks.write",
                                 effect="create", destination="tasks", digests=digests)
        proposal = ledger.propose("alice", spec)

:class:`Client` (sync) and :class:`AsyncClient` (asyncio) have the same
methods. Answers are typed (``ledger_client.answers``), refusals raise one
class per error code (``ledger_client.errors``), every POST carries an
``Idempotency-Key`` so retries never make a second proposal, and
:class:`WebhookVerifier` checks the ledger's signed webhooks. It needs httpx
and nothing of the ledger's server.
"""

from ledger_client._core import __version__, new_idempotency_key
from ledger_client.aio import AsyncClient
from ledger_client.answers import (
    ApprovalOut,
    AttemptOut,
    DeclineOut,
    ExecutorListOut,
    ExecutorOut,
    InboxOut,
    PolicySetOut,
    PresentationOut,
    ProposalOut,
    ProposalViewOut,
    StandingGrantOut,
)
from ledger_client.client import Client
from ledger_client.errors import LedgerClientError
from ledger_client.requests import ConditionIn, ProposalSpec, Provenance, Target
from ledger_client.retry import RetryPolicy
from ledger_client.spec import SpecDigests, pick_build, sha256_digest
from ledger_client.webhooks import WebhookVerifier

__all__ = [
    "ApprovalOut",
    "AsyncClient",
    "AttemptOut",
    "Client",
    "ConditionIn",
    "DeclineOut",
    "ExecutorListOut",
    "ExecutorOut",
    "InboxOut",
    "LedgerClientError",
    "PolicySetOut",
    "PresentationOut",
    "ProposalOut",
    "ProposalSpec",
    "ProposalViewOut",
    "Provenance",
    "RetryPolicy",
    "SpecDigests",
    "StandingGrantOut",
    "Target",
    "WebhookVerifier",
    "__version__",
    "new_idempotency_key",
    "pick_build",
    "sha256_digest",
]
