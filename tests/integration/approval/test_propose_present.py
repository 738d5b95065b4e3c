"""Propose and present (design.md 5.1) on every backend."""

from __future__ import annotations

import base64
import hashlib
import itertools
from dataclasses import replace

import pytest

from domain.errors import (
    ExecutorBuildUnavailable,
    InvalidInput,
    InvalidSpec,
    NondeterministicRenderer,
    ProposalClaimed,
    StaleVersion,
    UnknownPermission,
)
from domain.proposal import PresentationStatus, Proposal, ProposalStatus
from domain.services.approval import approve
from domain.services.proposals import propose
from domain.spec import ProposalSpec
from tests.support.worlds.approval import World, base_spec


def test_token_is_256_bit_and_only_its_hash_is_stored(world: World) -> None:
    proposal_id = world.propose()
    presentation = world.present(proposal_id)
    raw = base64.urlsafe_b64decode(presentation.token + "=" * (-len(presentation.token) % 4))
    assert len(raw) == 32
    digest = hashlib.sha256(presentation.token.encode()).hexdigest()
    stored = b"".join(e.state for e in world.store.read_stream(proposal_id))
    assert presentation.token.encode() not in stored
    assert digest.encode() in stored
    lookup = world.store.get_lookup(f"token#{digest}")
    assert lookup == {"proposal_id": proposal_id, "presentation_id": presentation.presentation_id}
    assert presentation.token not in str(lookup)


def test_revision_supersedes_and_revokes_in_one_event(world: World) -> None:
    proposal_id = world.propose()
    a, b = world.present(proposal_id), world.present(proposal_id)
    before = len(world.store.read_stream(proposal_id))
    result = propose(
        world.ctx,
        actor_id="alice",
        spec_data=base_spec(content={"t": "2"}),
        lineage_id=proposal_id,
        expected_version=1,
    )
    assert result.version == 2
    events = world.store.read_stream(proposal_id)
    assert len(events) == before + 1 and events[-1].topic.endswith(".Revised")
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None
    assert proposal.version_status(1) is ProposalStatus.SUPERSEDED
    assert proposal.version_status(2) is ProposalStatus.PRESENTED
    for presentation in (a, b):
        assert proposal.presentations[presentation.presentation_id]["status"] == (
            PresentationStatus.REVOKED.value
        )


def test_revision_of_claimed_version_is_refused(world: World) -> None:
    proposal_id = world.propose()
    approve(world.ctx, token=world.present(proposal_id).token, provenance=world.who)
    with pytest.raises(ProposalClaimed):
        propose(world.ctx, actor_id="alice", spec_data=base_spec(), lineage_id=proposal_id)


def test_revision_with_stale_expected_version_is_refused(world: World) -> None:
    proposal_id = world.propose()
    propose(world.ctx, actor_id="alice", spec_data=base_spec(), lineage_id=proposal_id)
    with pytest.raises(StaleVersion):
        propose(
            world.ctx,
            actor_id="alice",
            spec_data=base_spec(),
            lineage_id=proposal_id,
            expected_version=1,
        )


def test_presenting_a_superseded_version_is_refused(world: World) -> None:
    proposal_id = world.propose()
    propose(world.ctx, actor_id="alice", spec_data=base_spec(), lineage_id=proposal_id)
    with pytest.raises(StaleVersion):
        world.present(proposal_id, version=1)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"permission": "payments.send"}, UnknownPermission),
        ({"executor_build": "sha256:" + "00" * 32}, ExecutorBuildUnavailable),
        ({"surprise": 1}, InvalidSpec),
        ({"content": {"blob": "x" * 20000}}, InvalidSpec),
        ({"content": {"price": 1.5}}, InvalidSpec),
        ({"expires_at": "2026-11-01T00:00:00Z"}, InvalidSpec),
    ],
    ids=[
        "unknown_permission",
        "unavailable_build",
        "unknown_field",
        "oversize_content",
        "float_content",
        "already_expired",
    ],
)
def test_bad_proposals_are_rejected_and_write_nothing(
    world: World, changes: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        propose(world.ctx, actor_id="alice", spec_data=base_spec(**changes))


def test_nondeterministic_renderer_is_rejected(world: World) -> None:
    counter = itertools.count()

    class Flaky:
        build = "sha256:" + "ef" * 32

        def render(self, spec: ProposalSpec) -> str:
            return f"preview {next(counter)}"

    ctx = replace(world.ctx, renderer=Flaky())
    with pytest.raises(NondeterministicRenderer):
        propose(ctx, actor_id="alice", spec_data=base_spec())


@pytest.mark.parametrize("ttl", [0, 59, 86401])
def test_presentation_ttl_is_bounded(world: World, ttl: int) -> None:
    proposal_id = world.propose()
    with pytest.raises(InvalidInput):
        world.present(proposal_id, ttl_seconds=ttl)


def test_invariant_checker_sees_a_claim_without_its_attempt(world: World) -> None:
    """The I1-I3 checker run after every test can fail: a claim committed without
    its attempt (what a non-atomic approval would leave) is caught."""
    from domain.ports import Commit
    from domain.spec import derive_attempt_id
    from tests.support.worlds.approval import check_approval_invariants

    proposal_id = world.propose()
    presentation = world.present(proposal_id)
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None
    attempt_id = derive_attempt_id(proposal_id, 1, proposal.versions[1]["payload_hash"])
    proposal.claim(
        presentation_id=presentation.presentation_id,
        attempt_id=attempt_id,
        now=world.clock.now(),
        at="2026-11-29T12:00:00Z",
    )
    world.store.commit(Commit(aggregates=[proposal]))
    with pytest.raises(AssertionError, match="claimed proposal without its attempt"):
        check_approval_invariants(world.store, [proposal_id], world.clock.now())
    world.tokens.proposal_ids.remove(proposal_id)  # the after-test check would fail too
