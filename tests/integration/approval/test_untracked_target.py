"""An untracked target is checked absent by the commit that relies on it.

Found while checking that every read of an authorization is condition-checked
by the commit acting on it (the read cache depends on it): a spec whose target
the directory does not track was approved on that absence, but the claim did
not check it, so a target record created between the read and the commit, at
another revision, was not caught. Now the read set holds ``ReadCheck(target, 0)``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from domain.directory import DirectoryKind, target_record_id
from domain.errors import ProposalConflicted
from domain.ports import Commit
from domain.proposal import Proposal
from domain.services.approval import approve
from domain.services.directory import put_record
from domain.services.read_cache import ReadCache
from tests.support.worlds.approval import World

UNTRACKED = "task:99"


class TargetAppearsBeforeTheClaim:
    """Tracks the target at another revision just before the first commit that
    checks it, as a concurrent admin in another process would."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.inner = world.store
        self.armed = True
        self.checked: list[tuple[str, int]] = []

    def commit(self, commit: Commit) -> None:
        self.checked.extend((c.stream_id, c.version) for c in commit.read_set)
        if self.armed and any(c.stream_id == target_record_id(UNTRACKED) for c in commit.read_set):
            self.armed = False
            put_record(
                self.inner,
                self.world.clock,
                kind=DirectoryKind.TARGET,
                record_id=target_record_id(UNTRACKED),
                values={"revision": "r2"},
            )
        self.inner.commit(commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_a_target_tracked_between_the_read_and_the_claim_is_caught(
    world: World, cache: str
) -> None:
    """cold: a process that has cached nothing reads every record in one batch,
    which finds the target absent; the claim still checks it."""
    proposal_id = world.propose(target={"id": UNTRACKED, "base_revision": "r1"})
    token = world.present(proposal_id).token
    store = TargetAppearsBeforeTheClaim(world)
    ctx = replace(world.ctx, store=store)
    if cache == "cold":
        ctx = replace(ctx, cache=ReadCache())

    with pytest.raises(ProposalConflicted):
        approve(ctx, token=token, provenance=world.who)

    assert (target_record_id(UNTRACKED), 0) in store.checked
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None and proposal.versions[1]["status"] == "conflicted"
    assert world.executor_calls() == 0


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_an_untracked_target_that_stays_untracked_is_approved(world: World, cache: str) -> None:
    proposal_id = world.propose(target={"id": UNTRACKED, "base_revision": "r1"})
    ctx = world.ctx if cache == "warm" else replace(world.ctx, cache=ReadCache())
    result = approve(ctx, token=world.present(proposal_id).token, provenance=world.who)
    assert result.status == "execution_pending"
