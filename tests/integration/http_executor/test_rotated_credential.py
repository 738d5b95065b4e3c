"""Issue 26.1 reproduced: a re-send refused after a credential rotation is no proof
of "no effect", on SQLite and on the DynamoDB emulator.

The provider applies the effect and drops the connection; the ledger stops before
recovery re-sends; it starts again with a rotated provider token, which the
provider does not accept (401). The earlier dispatch landed, so the attempt must
not end ``failed_safe``: the re-sends are retried within the dispatch budget and
the attempt ends ``outcome_unknown`` for an admin, with one effect at the
provider. The same with a provider that refuses the re-send with a 422 ("key
already used"): evidence of the earlier effect, ``outcome_unknown`` at once.

A restart is what a new process has: a new executor registry (its own HTTP
clients and the token it read at start-up), read cache, service context and
worker, over the same stored ledger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.store import LedgerStore
from domain.services.context import ServiceContext
from domain.services.execution import Outcome, Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from tests.support.http_executors import executors_toml, load_http
from tests.support.provider_fixtures import Provider
from tests.support.worlds.execution import LEASE
from tests.support.worlds.http_executor import HttpWorld, http_world

pytestmark = pytest.mark.slow  # a provider process and real HTTP


@pytest.fixture
def store(engine_store: LedgerStore) -> LedgerStore:
    return engine_store


def restarted(world: HttpWorld, tmp_path: Path, token: str, max_dispatches: int) -> Worker:
    """Stop the ledger (close its registry) and start it again with ``token``."""
    assert world.loaded is not None
    before = {(e.capability, e.build_digest) for e in world.loaded.registry.entries()}
    world.loaded.registry.close()
    assert world.provider is not None
    text = executors_toml(world.provider.url, timeout=1)
    loaded = load_http(tmp_path, text, token, clock=world.clock)
    # The token is a secret: not part of the build, so the allowed builds still run.
    assert {(e.capability, e.build_digest) for e in loaded.registry.entries()} == before
    world.loaded = loaded
    ctx = ServiceContext(
        store=world.store,
        clock=world.clock,
        tokens=world.tokens,
        permissions=world.ctx.permissions,
        registry=loaded.registry,
    )
    return Worker(ctx, WorkerPolicy(lease_seconds=LEASE, max_dispatches=max_dispatches))


@pytest.fixture
def world(store: LedgerStore, provider: Provider, tmp_path: Path) -> HttpWorld:
    hworld = http_world(store, provider, tmp_path, timeout=1)
    yield hworld  # type: ignore[misc]
    assert hworld.loaded is not None
    hworld.loaded.registry.close()


def test_a_re_send_refused_after_a_credential_rotation_is_never_failed_safe(
    world: HttpWorld, provider: Provider, tmp_path: Path
) -> None:
    attempt_id = world.approved("provider_idempotency", fault="drop_after_effect")
    assert world.worker().process(attempt_id) is Outcome.PENDING  # applied, answer lost
    assert (world.effects_of(attempt_id), world.requests_of(attempt_id)) == (1, 1)

    worker = restarted(world, tmp_path, "rotated-" + provider.token, max_dispatches=3)
    outcomes = []
    for _ in range(4):
        world.clock.advance(LEASE + 1)
        outcomes.append(dict(run_recovery(worker).outcomes))

    attempt = world.attempt(attempt_id)
    assert attempt.status.value == "outcome_unknown", attempt.result
    assert attempt.result is not None and attempt.result["reason_code"] == "dispatch_limit"
    assert outcomes == [{"pending": 1}, {"pending": 1}, {"outcome_unknown": 1}, {}]
    assert world.topics(attempt_id).count("DispatchStarted") == 3
    assert world.effects_of(attempt_id) == 1  # the provider holds the effect
    # both re-sends reached the provider and were refused for their credential
    key = attempt.idempotency_key
    assert (world.requests_of(attempt_id), provider.unauthorized().get(key)) == (1, 2)


def test_a_re_send_refused_as_a_reused_key_is_outcome_unknown_at_once(
    world: HttpWorld, tmp_path: Path
) -> None:
    attempt_id = world.approved("provider_idempotency", fault="drop_then_reject", reject_status=422)
    assert world.worker().process(attempt_id) is Outcome.PENDING

    worker = restarted(world, tmp_path, world.provider.token, max_dispatches=5)  # type: ignore[union-attr]
    world.clock.advance(LEASE + 1)
    assert dict(run_recovery(worker).outcomes) == {"outcome_unknown": 1}

    attempt = world.attempt(attempt_id)
    assert attempt.result is not None and attempt.result["reason_code"] == "resend_key_reused"
    assert (world.effects_of(attempt_id), world.requests_of(attempt_id)) == (1, 2)
