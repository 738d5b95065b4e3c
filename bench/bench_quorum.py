"""What a quorum costs on DynamoDB: write requests, items and condition checks of
each vote of a two-person approval beside today's single approval.

The target (docs/policies.md): a two-person approval costs at most one write
request per vote plus today's approval commit, the deciding vote being that
commit with 3 more condition checks per counted voter. Counted on a real boto3
client against ministack (``harness.CapacityMeter``); counts do not depend on
the machine.

Run: ``.venv/bin/python bench/bench_quorum.py``.
"""

from __future__ import annotations

from typing import Any

from harness import CapacityMeter, Emulator, Report, Usage, dynamodb_store, parse_args

from domain.services.approval import approve
from domain.services.proposals import propose
from tests.support.policies import apply, enrol_members, present_to, quorum_policy
from tests.support.worlds.approval import World, base_spec

HEADERS = [
    "approval",
    "step",
    "answer",
    "requests by operation",
    "write requests",
    "items written",
    "condition checks",
]


def row(kind: str, step: str, answer: str, used: Usage) -> list[Any]:
    return [
        kind,
        step,
        answer,
        used.ops(),
        used.writes,
        used.items_written,
        used.condition_checks,
    ]


def measure(emulator: Emulator) -> list[list[Any]]:
    client = emulator.client()
    meter = CapacityMeter(client)
    world = World(dynamodb_store(client, emulator.table(client)))
    rows: list[list[Any]] = []
    single = propose(world.ctx, actor_id="alice", spec_data=base_spec()).proposal_id
    token = world.present(single).token
    with meter.measure() as used:
        answer = approve(world.ctx, token=token, provenance=world.who)
    rows.append(row("single", "the approval", answer.status, used))
    view = apply(world, quorum_policy(2))
    members = enrol_members(world, 2)
    spec = base_spec(policy_digest=view.digest)
    pair = propose(world.ctx, actor_id="alice", spec_data=spec).proposal_id
    tokens = [present_to(world, pair, who) for who in members]
    for number, (who, member_token) in enumerate(zip(members, tokens, strict=True), start=1):
        with meter.measure() as used:
            answer = approve(world.ctx, token=member_token, provenance=who)
        rows.append(row("two-person", f"vote {number}", answer.status, used))
    client.close()
    return rows


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_quorum", args.quick)
    with Emulator() as emulator:
        rows = measure(emulator)
    report.table("Each approval request, on the emulator", HEADERS, rows, align="llllrrr")
    report.write(__doc__ or "")


if __name__ == "__main__":
    main()
