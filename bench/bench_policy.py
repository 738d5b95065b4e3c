"""What policy evaluation adds to an embedded lifecycle: full lifecycles per
second with no policy set beside the same lifecycles under the three worked
examples of docs/policies.md (auto-approve small tasks, forbid deletions, two
people for payments over 500), measured side by side in one run.

A lifecycle is propose, present, approve and the worker's run to
``succeeded`` on SQLite, one thread. Its proposal (45 minutes of work, an
amount of 120, a create) is one no example approves, forbids or hands to a
quorum, so both columns take the same path and commit the same events: what
differs is that the policy set is read and evaluated at the proposal, at the
approval and at the worker's recheck (I15), and its record is one more read
check of the approval's commit. Cedar answers once per proposal: the approval
and the recheck ask the same question of the same set and get the remembered
verdict (``domain.services.policy_decisions``); every proposal has a title of
its own, so no lifecycle is answered from another's verdict. Samples
alternate between the two stores (round robin), on the repository's file
system (an fsync per commit) and on a RAM file system (``/dev/shm``: no sync
cost, so the ratio is of CPU alone, the strict figure).

The target (issue 28): policy evaluation adds at most 15 % to an embedded
lifecycle.

Where the time goes (cProfile, 200 lifecycles on /dev/shm under the three
examples): 600 verdicts asked take 0.15 s of 2.64 s (5.7 %), of which one
Cedar call per lifecycle (``is_authorized`` with the parsed ``PolicySet``,
about 0.4 ms under the profiler); before the verdicts were remembered the
same 600 reached Cedar and took 0.45 s (18 %). Under a loaded machine the
RAM column varies by several points from run to run.

Run: ``.venv/bin/python bench/bench_policy.py [--quick]``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import CAPABILITY, ROOT, Lifecycle, Report, parse_args, sqlite_store

from domain.services.policies import apply_policy_set

EXAMPLES = f"""
@id("small-tasks")
@auto_approve
permit (principal, action == Action::"{CAPABILITY}", resource)
when {{ context.content has minutes && context.content.minutes <= 30 }};

@id("no-deletions")
forbid (principal, action, resource)
when {{ context.effect == "delete" }};

@id("two-person-payments")
@quorum("2")
@group("finance")
permit (principal, action == Action::"{CAPABILITY}", resource)
when {{ context.content has amount && context.content.amount > 500 }};
"""
TARGET = 0.15


class ContentLifecycle(Lifecycle):
    """A lifecycle whose proposal carries the fields the examples look at, and
    the digest of the policy set in force (what a proposer reads from GET /policies)."""

    policy_digest: str | None = None
    made = 0

    def spec(self, capability: str = CAPABILITY, simulate: str = "success") -> dict[str, Any]:
        # Every proposal its own content: the verdict of one is never the
        # remembered verdict of another (the proposal's evaluation is a real one).
        self.made += 1
        spec = super().spec(capability, simulate)
        spec["content"] = {"title": f"Pay the cleaner #{self.made}", "simulate": simulate}
        spec["content"] |= {"minutes": 45, "amount": 120}
        if self.policy_digest is not None:
            spec["policy_digest"] = self.policy_digest
        return spec


def lifecycle(directory: Path, name: str, policies: str | None) -> tuple[Callable[[], None], Any]:
    life = ContentLifecycle(sqlite_store(str(directory / f"{name}.db")))
    if policies is not None:
        view = apply_policy_set(life.store, life.clock, policies, cache=life.ctx.cache)
        life.policy_digest = view.digest
    worker = life.worker()

    def one() -> None:
        outcome = life.run(0, worker)
        assert outcome.value == "succeeded", outcome

    return one, life


def rates(directory: Path, samples: int, per_sample: int) -> tuple[float, float]:
    """Median lifecycles per second without and with the policy set."""
    plain, plain_life = lifecycle(directory, "none", None)
    ruled, ruled_life = lifecycle(directory, "examples", EXAMPLES)
    operations = [plain, ruled]
    for op in operations:  # warm both (caches, the compiled policy set)
        for _ in range(max(1, per_sample // 4)):
            op()
    results: list[list[float]] = [[], []]
    for _ in range(samples):
        for i, op in enumerate(operations):
            start = time.perf_counter()
            for _ in range(per_sample):
                op()
            results[i].append(per_sample / (time.perf_counter() - start))
    plain_life.store.recorder.close()
    ruled_life.store.recorder.close()
    return statistics.median(results[0]), statistics.median(results[1])


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_policy", args.quick)
    samples, per_sample = (2, 3) if args.quick else (9, 40)
    rows = []
    places = [
        ("repository file system (fsync per commit)", ROOT / "var"),
        ("RAM file system /dev/shm (no sync cost)", Path("/dev/shm")),
    ]
    for label, base in places:
        if not base.is_dir():
            if base.parent != ROOT:
                continue
            base.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=base, prefix="bench-") as tmp:
            plain, ruled = rates(Path(tmp), samples, per_sample)
        added = plain / ruled - 1
        rows.append(
            [
                label,
                f"{plain:,.0f}",
                f"{ruled:,.0f}",
                f"{ruled / plain:.3f}",
                f"{added * 100:+.1f} %",
                "yes" if added <= TARGET else "NO",
            ]
        )
    report.table(
        "Embedded lifecycles per second, no policy set vs the three worked examples",
        [
            "store",
            "no policy set",
            "the three examples",
            "with / without",
            "time added per lifecycle",
            f"within {TARGET:.0%}",
        ],
        rows,
        align="lrrrrl",
    )
    report.write(__doc__ or "")


if __name__ == "__main__":
    main()
