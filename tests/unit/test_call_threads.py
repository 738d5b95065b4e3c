"""Executor calls on pooled threads: reused, never queued behind one another,
still abandoned at the deadline with the late answer reported."""

from __future__ import annotations

import contextvars
import multiprocessing
import threading
from collections.abc import Iterator

import pytest

from domain.services.deadline import CallThreads, DeadlineExceeded, ThreadedCalls

SPAN: contextvars.ContextVar[str] = contextvars.ContextVar("span", default="none")


@pytest.fixture()
def pool() -> Iterator[CallThreads]:
    threads = CallThreads()
    yield threads
    threads.close()


def ignore(result: object, error: BaseException | None) -> None:
    return None


def test_sequential_calls_reuse_one_thread(pool: CallThreads) -> None:
    """The pool thread counts itself idle before its caller is answered. Counted
    after (as it once was), a caller that submitted its next call before the pool
    thread got the GIL back found no idle thread and started a second one: this
    test failed that way about once in a full suite run on a loaded machine."""
    calls = ThreadedCalls(pool)
    idents = {calls.run(threading.get_ident, 5, ignore) for _ in range(50)}
    assert pool.started() == 1
    assert len(idents) == 1 and threading.get_ident() not in idents


def test_calls_run_at_once_as_with_a_thread_per_call(pool: CallThreads) -> None:
    """Eight callers at once: each call waits at a barrier that only opens when all
    eight calls are running, so a pool that queued calls would time out here."""
    calls = ThreadedCalls(pool)
    barrier = threading.Barrier(8, timeout=30)
    answers: list[int] = []

    def caller() -> None:
        answers.append(calls.run(barrier.wait, 30, ignore))

    callers = [threading.Thread(target=caller) for _ in range(8)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(60)
    assert sorted(answers) == list(range(8))
    assert pool.started() == 8


def test_an_abandoned_call_holds_its_thread_and_the_next_call_does_not_wait(
    pool: CallThreads,
) -> None:
    calls = ThreadedCalls(pool)
    release = threading.Event()
    answers: list[tuple[object, BaseException | None]] = []

    def hangs() -> str:
        assert release.wait(30)
        return "landed"

    assert calls.run(lambda: 1, 5, ignore) == 1
    with pytest.raises(DeadlineExceeded):
        calls.run(hangs, 0.01, lambda result, error: answers.append((result, error)))
    assert calls.abandoned() == 1 and answers == []
    # The hung call keeps its thread: the next call gets another one at once.
    assert calls.run(lambda: 2, 5, ignore) == 2
    assert pool.started() == 2
    release.set()
    assert calls.wait_abandoned(30)
    assert answers == [("landed", None)] and calls.abandoned() == 0
    # Once it answered, its thread serves calls again: no third thread.
    for _ in range(10):
        assert calls.run(lambda: 3, 5, ignore) == 3
    assert pool.started() == 2


def test_a_failing_late_callback_does_not_end_the_thread(pool: CallThreads) -> None:
    calls = ThreadedCalls(pool)
    release = threading.Event()

    def boom(result: object, error: BaseException | None) -> None:
        raise RuntimeError("the store is down")

    with pytest.raises(DeadlineExceeded):
        calls.run(lambda: release.wait(30), 0.01, boom)
    release.set()
    assert calls.wait_abandoned(30)
    assert calls.run(lambda: "again", 5, ignore) == "again"
    assert pool.started() == 1


def test_errors_and_context_variables_follow_the_call(pool: CallThreads) -> None:
    calls = ThreadedCalls(pool)
    token = SPAN.set("approve")
    try:
        assert calls.run(SPAN.get, 5, ignore) == "approve"
    finally:
        SPAN.reset(token)
    assert calls.run(SPAN.get, 5, ignore) == "none"  # nothing leaks between calls

    def provider_error() -> None:
        raise ValueError("provider error")

    with pytest.raises(ValueError, match="provider error"):
        calls.run(provider_error, 5, ignore)


def test_a_late_answer_is_handed_over_in_the_callers_context(pool: CallThreads) -> None:
    calls = ThreadedCalls(pool)
    release = threading.Event()
    seen: list[str] = []
    token = SPAN.set("worker")
    try:
        with pytest.raises(DeadlineExceeded):
            calls.run(lambda: release.wait(30), 0.01, lambda result, error: seen.append(SPAN.get()))
    finally:
        SPAN.reset(token)
    release.set()
    assert calls.wait_abandoned(30)
    assert seen == ["worker"]


def _call_in_child(answers: multiprocessing.Queue[object]) -> None:
    try:
        answers.put(ThreadedCalls().run(lambda: "child", 5, ignore))
    except DeadlineExceeded:
        answers.put("deadline")


def test_a_forked_child_starts_its_own_threads() -> None:
    """The parent's idle threads do not exist in a forked child; counting them
    would leave the child's calls queued for no one until the deadline."""
    assert ThreadedCalls().run(lambda: "parent", 5, ignore) == "parent"  # a thread is idle
    fork = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[object] = fork.Queue()
    child = fork.Process(target=_call_in_child, args=(answers,))
    child.start()
    try:
        assert answers.get(timeout=30) == "child"
    finally:
        child.join(30)
