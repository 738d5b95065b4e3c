"""``python -m tests.chaos``: many randomized schedules, or one replayed by its seed.

python -m tests.chaos --schedules 10000 --jobs 2     # memory + SQLite, mixed
python -m tests.chaos --seed 1234 --trace            # replay one schedule
python -m tests.chaos --store dynamodb --schedules 20   # on a local ministack
python -m tests.chaos --schedules 300 --plant old-lookup-rule   # must find violations
python -m tests.chaos --schedules 300 --plant resend-no-write-proof   # likewise
python -m tests.chaos --schedules 2000 --plant no-watch   # likewise
python -m tests.chaos --schedules 300 --plant grant-over-max          # likewise (I14)
python -m tests.chaos --schedules 300 --plant ignore-forbid           # likewise (I15)
python -m tests.chaos --schedules 300 --plant double-vote             # likewise (I13)
python -m tests.chaos --schedules 300 --plant escalation-keeps-presentations   # likewise
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from tests.chaos.backends import store_for_seed
from tests.chaos.runner import Outcome, run_many, run_schedule, summarize
from tests.chaos.world import Profile, profile_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, help="replay exactly this schedule")
    parser.add_argument(
        "--store", default="mixed", choices=("mixed", "memory", "sqlite", "dynamodb")
    )
    parser.add_argument("--steps", type=int, help=f"ticks per schedule (default {Profile.steps})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--trace", action="store_true", help="print the whole trace")
    parser.add_argument(
        "--plant",
        choices=(
            "old-lookup-rule",
            "resend-no-write-proof",
            "no-watch",
            "grant-over-max",
            "ignore-forbid",
            "double-vote",
            "escalation-keeps-presentations",
        ),
        help="re-introduce a known bug (the run must then find violations): "
        "old-lookup-rule trusts a lookup's 'not applied' at lease expiry; "
        "resend-no-write-proof takes a re-send's refusal for a proof of no effect; "
        "no-watch never looks again after a lookup's 'not applied' or a no_effect; "
        "grant-over-max lets a claim take a spent standing grant's use; "
        "ignore-forbid lets approvals and rechecks ignore forbid policies; "
        "double-vote lets one quorum member's second vote count again; "
        "escalation-keeps-presentations lets Escalated revoke nothing, so a "
        "presentation made before it can still decide the version",
    )
    args = parser.parse_args(argv)
    if args.plant == "old-lookup-rule":
        from tests.chaos.late import plant_old_lookup_rule

        plant_old_lookup_rule()
    elif args.plant == "resend-no-write-proof":
        from tests.chaos.late import plant_resend_no_write_proof

        plant_resend_no_write_proof()
    elif args.plant == "no-watch":
        from tests.chaos.late import plant_no_watch

        plant_no_watch()
    elif args.plant == "grant-over-max":
        from tests.chaos.policies import plant_grant_over_max

        plant_grant_over_max()
    elif args.plant == "double-vote":
        from tests.chaos.policies import plant_double_vote

        plant_double_vote()
    elif args.plant == "escalation-keeps-presentations":
        from tests.chaos.escalations import plant_escalation_keeps_presentations

        plant_escalation_keeps_presentations()
    elif args.plant == "ignore-forbid":
        from tests.chaos.policies import plant_ignore_forbid

        plant_ignore_forbid()

    if args.store == "dynamodb":
        return _dynamodb(args)
    if args.seed is not None:
        outcome = run_schedule(
            args.seed,
            store_for_seed(args.seed, args.store),
            profile_for(args.seed, args.steps),
            keep_trace=True,
        )
        return _report_one(outcome, args.trace)

    seeds = range(args.first_seed, args.first_seed + args.schedules)
    started = time.monotonic()
    done = [0]

    def progress(_: Outcome) -> None:
        done[0] += 1
        if done[0] % 1000 == 0:
            print(f"  {done[0]} schedules ({time.monotonic() - started:.0f}s)", flush=True)

    outcomes = run_many(seeds, args.store, args.steps, jobs=args.jobs, progress=progress)
    return _report_many(outcomes, time.monotonic() - started, args.store, args.plant)


def _dynamodb(args: Any) -> int:
    from tests.support import ministack
    from tests.support.dynamodb_fixtures import ENDPOINT_ENV, new_client

    endpoint = os.environ.get(ENDPOINT_ENV)
    node = None if endpoint else ministack.start()
    client = new_client(endpoint or node.url)  # type: ignore[union-attr]
    try:
        if args.seed is not None:
            return _report_one(
                run_schedule(
                    args.seed,
                    "dynamodb",
                    profile_for(args.seed, args.steps),
                    dynamodb_client=client,
                    keep_trace=True,
                ),
                args.trace,
            )
        started = time.monotonic()
        outcomes = [
            run_schedule(seed, "dynamodb", profile_for(seed, args.steps), dynamodb_client=client)
            for seed in range(args.first_seed, args.first_seed + args.schedules)
        ]
        return _report_many(outcomes, time.monotonic() - started, "dynamodb")
    finally:
        client.close()
        if node is not None:
            node.stop()


def _report_one(outcome: Outcome, full: bool) -> int:
    if full or not outcome.ok:
        print("\n".join(outcome.trace_tail))
    status = "ok" if outcome.ok else f"FAILED: {outcome.error}"
    print(f"seed {outcome.seed} on {outcome.store}: {status}")
    if outcome.ok:
        print(f"digest {outcome.digest}")
    return 0 if outcome.ok else 1


def _report_many(
    outcomes: list[Outcome], seconds: float, choice: str, plant: str | None = None
) -> int:
    per_store, counts = summarize(outcomes)
    failed = [o for o in outcomes if not o.ok]
    stores = ", ".join(f"{store} {n}" for store, n in sorted(per_store.items()))
    print(
        f"chaos: {len(outcomes)} schedules ({stores}) in {seconds:.0f}s: "
        f"{len(outcomes) - len(failed)} passed, {len(failed)} failed"
    )
    for prefix in (
        "action:",
        "fault:",
        "crash:",
        "switch:",
        "stream:",
        "clock:",
        "client:",
        "overrun:",
        "landing:",
        "credential:",
        "resend:",
        "policy:",
        "escalation:",
        "claimed:",
        "final:",
        "refused:",
    ):
        picked = {
            k.removeprefix(prefix): v for k, v in sorted(counts.items()) if k.startswith(prefix)
        }
        if picked:
            print(f"  {prefix[:-1]}s: " + ", ".join(f"{k}={v}" for k, v in picked.items()))
    for outcome in failed[:20]:
        print(f"FAILED seed {outcome.seed} ({outcome.store}): {outcome.error}")
    if failed:
        store = "" if choice == "mixed" else f" STORE={choice}"
        if plant:
            print(
                f"replay: python -m tests.chaos --seed {failed[0].seed} --store "
                f"{failed[0].store} --plant {plant}"
            )
        else:
            print(f"replay: make chaos SEED={failed[0].seed}{store}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
