"""I14 under concurrency: a standing grant is never used beyond its maximum, nor
after its revocation, whatever the concurrency, round after round, on memory,
SQLite, a DynamoDB table of this version (grants count their uses on use
shards, each fenced by the revocation) and one made before the layout record
(grants count their uses on their own record).

Every round ends with the grant's streams read back raw
(``tests.support.grant_checks``); two planted bugs (a shard that gives one use
too many, a revocation that misses a fence) show the checks and the races
catch what they are for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from adapters.store import LedgerStore
from domain.attempt import AttemptStatus
from domain.directory import standing_grant_record_id
from domain.errors import LedgerError
from domain.ports import Commit
from domain.services import grant_shards, grants
from domain.services.execution import Worker, WorkerPolicy
from domain.services.proposals import ProposalResult, propose
from domain.services.read_cache import ReadCache
from tests.support.grant_checks import grant_uses, grant_violations
from tests.support.policies import grant_bounds
from tests.support.stores import STORES_AND_LAYOUTS, opened_store
from tests.support.worlds.approval import World, base_spec
from tests.support.worlds.execution import LEASE, ExecutionWorld

THREADS = 25
MAX_USES = 5
USED_BEFORE = 3  # so the race is for the last two
ADMIN = grants.Grantor("admin", "ops")


@pytest.fixture(params=STORES_AND_LAYOUTS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    yield from opened_store(request, tmp_path)


def rounds_for(request: pytest.FixtureRequest) -> int:
    return 3 if str(request.node.callspec.params["store"]).startswith("dynamodb") else 8


def give(world: World, max_uses: int) -> str:
    made = grants.grant(
        world.ctx, actor_id="alice", bounds=grant_bounds(world, max_uses=max_uses), grantor=ADMIN
    )
    return str(made["grant_id"])


def press_all(world: World, count: int, before: Any = None) -> list[ProposalResult | LedgerError]:
    """``count`` proposals at once (each thread its own read cache, as processes)."""
    barrier = threading.Barrier(count + (1 if before else 0))

    def press(_: int) -> ProposalResult | LedgerError:
        ctx = replace(world.ctx, cache=ReadCache())
        barrier.wait()
        try:
            return propose(ctx, actor_id="alice", spec_data=base_spec())
        except LedgerError as exc:  # pragma: no cover - asserted by the callers
            return exc

    with ThreadPoolExecutor(count + 1) as pool:
        racing = pool.submit(lambda: (barrier.wait(), before()) if before else None)
        answers = list(pool.map(press, range(count)))
        racing.result()
    return answers


def claims_of(answers: list[ProposalResult | LedgerError], grant_id: str) -> list[ProposalResult]:
    errors = [a for a in answers if isinstance(a, LedgerError)]
    assert not errors, errors
    results = [a for a in answers if isinstance(a, ProposalResult)]
    assert all(r.status in ("claimed", "presented") for r in results)
    return [r for r in results if r.approval and r.approval.get("grant_id") == grant_id]


def sharded(store: LedgerStore) -> bool:
    return store.grant_use_shards() > 0


@pytest.mark.slow
def test_racing_proposals_never_use_a_grant_beyond_its_maximum(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    for _ in range(rounds_for(request)):
        grant_id = give(world, MAX_USES)
        before = [propose(world.ctx, actor_id="alice", spec_data=base_spec()) for _ in range(3)]
        assert all(r.status == "claimed" for r in before)
        claimed = claims_of(press_all(world, THREADS), grant_id)
        # every remaining use taken, no more; everyone else is left for a person
        assert len(claimed) == MAX_USES - USED_BEFORE
        numbers = [r.approval["use"] for r in before + claimed]  # type: ignore[index]
        assert sorted(numbers) == list(range(1, MAX_USES + 1))  # each use its own number
        assert grants.get(world.ctx, grant_id)["uses"] == MAX_USES
        assert len(grant_uses(store, grant_id)) == MAX_USES
        if sharded(store):  # the last uses were on shards other claims had not filled
            assert {u["shard"] for u in grant_uses(store, grant_id)} == set(range(MAX_USES))
        assert grant_violations(store, grant_id) == []
        grants.revoke(world.ctx, grant_id=grant_id, grantor=ADMIN)
        assert grant_violations(store, grant_id) == []
    assert world.executor_calls() == 0


@pytest.mark.slow
def test_many_proposals_share_one_grant_and_never_take_more_than_its_uses(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    """More proposals than uses, all at once, on a grant spread over many shards:
    no use is taken twice or beyond the maximum (a claim that keeps losing its
    races is left for a person, never forced), and what the race left is taken
    one by one to the last use, then no more."""
    for _ in range(rounds_for(request) // 2 + 1):
        grant_id = give(world, 20)
        claimed = claims_of(press_all(world, THREADS), grant_id)
        numbers = [r.approval["use"] for r in claimed]  # type: ignore[index]
        assert len(set(numbers)) == len(numbers) <= 20 and set(numbers) <= set(range(1, 21))
        while grants.get(world.ctx, grant_id)["state"] == "active":
            after = propose(world.ctx, actor_id="alice", spec_data=base_spec())
            assert after.status == "claimed", "a use left that no proposal could take"
            numbers.append(after.approval["use"])  # type: ignore[index]
        assert sorted(numbers) == list(range(1, 21))
        assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).status == "presented"
        assert grant_violations(store, grant_id) == []
        grants.revoke(world.ctx, grant_id=grant_id, grantor=ADMIN)


class CommitTimes:
    """The store, noting when the grant's revocation was stored and when each
    commit that used the grant or relied on it (a use, a dispatch marker) was sent."""

    def __init__(self, inner: LedgerStore) -> None:
        self.inner = inner
        self.grant_id = ""
        self._lock = threading.Lock()
        self.revoked_at: float | None = None
        self.sent: list[tuple[str, float]] = []

    def commit(self, commit: Commit) -> None:
        events = [type(e).__qualname__ for a in commit.aggregates for e in a.pending_events]
        used = any(
            self.grant_id in a.id
            and any(type(e).__qualname__.endswith(".Used") for e in a.pending_events)
            for a in commit.aggregates
        )
        checked = any(self.grant_id in c.stream_id for c in commit.read_set)
        relies = bool(self.grant_id) and (used or checked)
        sent = time.monotonic()
        self.inner.commit(commit)
        stored = time.monotonic()
        revokes = any(a.id == standing_grant_record_id(self.grant_id) for a in commit.aggregates)
        with self._lock:
            if revokes and "DirectoryRecord.Changed" in events:
                self.revoked_at = stored
            if relies and "DirectoryRecord.Changed" not in events:
                self.sent.append((" ".join(sorted(set(events))), sent))

    def after_revocation(self) -> list[str]:
        assert self.revoked_at is not None
        return [what for what, sent in self.sent if sent > self.revoked_at]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.slow
def test_no_use_commits_once_its_grant_is_revoked(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    timed = CommitTimes(store)
    world.ctx = replace(world.ctx, store=timed)  # type: ignore[arg-type]
    revoked_some = False
    for _ in range(rounds_for(request)):
        timed.grant_id = grant_id = give(world, 40)
        timed.revoked_at, timed.sent = None, []
        revoke = partial(grants.revoke, world.ctx, grant_id=grant_id, grantor=ADMIN)
        answers = press_all(world, THREADS, before=revoke)
        claimed = claims_of(answers, grant_id)
        assert timed.after_revocation() == []  # no use sent after the revocation was stored
        assert len(claimed) == len(grant_uses(store, grant_id)) < THREADS + 1
        revoked_some = revoked_some or len(claimed) < THREADS
        assert grant_violations(store, grant_id) == []
        assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).status == "presented"
    assert revoked_some, "the revocation never came before a use: the race never happened"


def test_a_revoked_grant_fails_its_undispatched_attempts_safe_racing_their_markers(
    xworld: ExecutionWorld, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    """Cold workers dispatch attempts a grant approved while the grant is revoked:
    no dispatch marker is sent after the revocation was stored, and every attempt
    not dispatched by then fails safe (``standing_grant_revoked``), uncalled."""
    timed = CommitTimes(store)
    failed = 0
    for _ in range(rounds_for(request)):
        timed.grant_id = grant_id = give(xworld, 12)
        spec = base_spec(content={"title": "Buy milk", "simulate": "success"})
        attempts = [
            propose(xworld.ctx, actor_id="alice", spec_data=spec).attempt_id or "" for _ in range(6)
        ]
        timed.revoked_at, timed.sent = None, []
        markers_racing_revocation(xworld, timed, attempts)
        assert [w for w in timed.after_revocation() if "DispatchStarted" in w] == []
        for attempt_id in attempts:
            attempt = xworld.attempt(attempt_id)
            if "DispatchStarted" in xworld.topics(attempt_id):
                assert xworld.calls_for(attempt_id) == 1
                continue
            failed += 1
            assert attempt.status is AttemptStatus.FAILED_SAFE
            assert (attempt.result or {})["reason_code"] == "standing_grant_revoked"
            assert xworld.calls_for(attempt_id) == 0
        assert grant_violations(store, grant_id) == []
    assert failed, "the revocation never came before a marker: the race never happened"


def markers_racing_revocation(
    xworld: ExecutionWorld, timed: CommitTimes, attempts: list[str]
) -> None:
    """Cold workers (nothing cached) process ``attempts`` while the grant is revoked."""
    barrier = threading.Barrier(len(attempts) + 1)
    through = replace(xworld.ctx, store=timed)  # type: ignore[arg-type]

    def cold_worker(attempt_id: str) -> None:
        ctx = replace(through, cache=ReadCache())
        barrier.wait()
        Worker(ctx, WorkerPolicy(lease_seconds=LEASE)).process(attempt_id)

    def revoke() -> None:
        barrier.wait()
        grants.revoke(through, grant_id=timed.grant_id, grantor=ADMIN)

    with ThreadPoolExecutor(len(attempts) + 1) as pool:
        done = [pool.submit(cold_worker, a) for a in attempts] + [pool.submit(revoke)]
        for future in done:
            future.result()


# -- planted bugs: what the checks and the races are for -------------------------------


def test_a_shard_that_gives_one_use_too_many_is_caught(
    world: World, store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not sharded(store):
        pytest.skip("grants on this store count their uses on their own record")
    monkeypatch.setattr(grant_shards, "has_room", lambda uses, quota: uses <= quota)
    grant_id = give(world, 4)
    claimed = claims_of(press_all(world, 12), grant_id)
    assert len(claimed) > 4  # the bug at work
    problems = grant_violations(store, grant_id)
    assert any("beyond its quota" in p for p in problems), problems
    assert any("beyond its maximum of 4" in p for p in problems), problems


def test_a_revocation_that_misses_a_fence_is_caught(
    xworld: ExecutionWorld, store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one shard left unfenced, a process whose cached grant record predates
    the revocation still claims through that shard, and an attempt approved on
    it before the revocation is still dispatched; with every fence, neither."""
    if not sharded(store):
        pytest.skip("grants on this store count their uses on their own record")
    monkeypatch.setattr(store, "grant_use_shards", lambda: 2)  # two shards of 4 uses
    spec = base_spec(content={"title": "Buy milk", "simulate": "success"})
    found = {}
    for planted in (False, True):
        grant_id = give(xworld, 8)
        first = propose(xworld.ctx, actor_id="alice", spec_data=spec)
        assert first.approval is not None
        if planted:
            skipped = first.approval["shard"]
            monkeypatch.setattr(grant_shards, "fenced", lambda grant, s=skipped: [1 - s])
        elsewhere = replace(xworld.ctx, cache=ReadCache())  # another process revokes
        grants.revoke(elsewhere, grant_id=grant_id, grantor=ADMIN)
        xworld.worker().process(first.attempt_id or "")
        later = [propose(xworld.ctx, actor_id="alice", spec_data=spec) for _ in range(12)]
        found[planted] = (
            xworld.calls_for(first.attempt_id or ""),
            len([r for r in later if r.status == "claimed"]),
            grant_violations(store, grant_id),
        )
    assert found[False] == (0, 0, [])
    calls, claims, problems = found[True]
    assert calls == 1  # dispatched after its grant was revoked: the bug at work
    assert claims >= 1  # and used after it
    assert any("revoked without its fences" in p for p in problems), problems
