"""Run many schedules (or replay one) and report the count and any failing seed."""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.backends import open_backend, store_for_seed
from tests.chaos.sim import Simulation
from tests.chaos.world import Profile, profile_for

TRACE_TAIL = 60


@dataclass
class Outcome:
    """One schedule's verdict."""

    seed: int
    store: str
    ok: bool
    digest: str = ""
    error: str = ""
    trace_tail: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def run_schedule(
    seed: int,
    store: str,
    profile: Profile | None = None,
    *,
    dynamodb_client: Any = None,
    keep_trace: bool = False,
) -> Outcome:
    """Run one seed on one store; never raises for a failing schedule.

    Without a profile, the seed picks its flavour (``profile_for``).
    """
    profile = profile or profile_for(seed)
    sim: Simulation | None = None
    try:
        with open_backend(store, seed, dynamodb_client=dynamodb_client) as backend:
            sim = Simulation(seed, backend.store, backend.views, profile, on_arm=backend.on_arm)
            trace = sim.run()
        counts = dict(sim.counts)
        counts.update({f"client:{k}": v for k, v in backend.injected.items()})
        return Outcome(
            seed, store, True, sim.digest(), trace_tail=trace if keep_trace else [], counts=counts
        )
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        where = traceback.extract_tb(exc.__traceback__)[-1]
        trace = sim.trace if sim is not None else []
        return Outcome(
            seed,
            store,
            False,
            error=f"{detail} (at {where.filename}:{where.lineno})",
            trace_tail=trace if keep_trace else trace[-TRACE_TAIL:],
            counts=dict(sim.counts) if sim else {},
        )


def _worker(job: tuple[int, str, int | None]) -> Outcome:
    seed, store, steps = job
    return run_schedule(seed, store, profile_for(seed, steps))


def run_many(
    seeds: range, store_choice: str, steps: int | None = None, jobs: int = 1, progress: Any = None
) -> list[Outcome]:
    """Run every seed (memory / SQLite / mixed) on ``jobs`` processes."""
    work = [(seed, store_for_seed(seed, store_choice), steps) for seed in seeds]
    if jobs <= 1:
        results = []
        for job in work:
            results.append(_worker(job))
            if progress is not None:
                progress(results[-1])
        return results
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        results = []
        for outcome in pool.imap_unordered(_worker, work, chunksize=8):
            results.append(outcome)
            if progress is not None:
                progress(outcome)
    return sorted(results, key=lambda o: o.seed)


def summarize(outcomes: list[Outcome]) -> tuple[Counter[str], Counter[str]]:
    """Schedules per store, and the summed action / fault / crash counts."""
    per_store: Counter[str] = Counter(o.store for o in outcomes)
    counts: Counter[str] = Counter()
    for outcome in outcomes:
        counts.update(outcome.counts)
    return per_store, counts
