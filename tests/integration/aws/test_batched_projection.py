"""A stream batch costs one read per stream and one write for all its rows, in
the projector and the webhook Lambdas alike; a batch delivered again writes
nothing, and a view never goes back (design.md 6)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.aws_lambda import projector, webhooks
from adapters.bootstrap import Ledger
from adapters.dynamodb.known_versions import KnownVersions
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.views import DynamoDBViewStore
from domain.errors import StoreUnavailable
from domain.notifications import NotificationType
from projections.status import STATUS_VIEW
from projections.webhooks import delivery_list_key
from tests.support.aws_lambda import FakeLambdaContext, StreamTap
from tests.support.sam_template import filter_patterns, load_template, passes
from tests.support.webhooks import subscription
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb


class Requests:
    """Every request the ledger's client sends: operations, and the streams queried."""

    def __init__(self, client: Any) -> None:
        self.ops: Counter[str] = Counter()
        self.queried: list[str] = []
        client.meta.events.register("provide-client-params.dynamodb", self._sent)

    def _sent(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.ops[model.name] += 1
        if model.name == "Query" and "IndexName" not in params:
            self.queried.append(params["ExpressionAttributeValues"][":pk"]["S"])

    def take(self) -> tuple[Counter[str], list[str]]:
        ops, queried = self.ops, self.queried
        self.ops, self.queried = Counter(), []
        return ops, queried


@pytest.fixture
def requests(dynamodb_recorder: DynamoDBLedgerRecorder) -> Iterator[Requests]:
    yield Requests(dynamodb_recorder.client)


@pytest.fixture(scope="module")
def projector_filter() -> list[dict[str, Any]]:
    return filter_patterns(load_template()["Resources"]["ProjectorFunction"], "AttemptEvents")


def two_lifecycles(world: ExecutionWorld) -> list[str]:
    ids = [world.approved("provider_idempotency") for _ in range(2)]
    for attempt_id in ids:
        world.worker().process(attempt_id)
    return ids


def batch(stream: StreamTap, pattern: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": [r for r in stream.records() if passes(pattern, r)]}


def test_a_batch_of_two_lifecycles_is_four_reads_and_one_write_and_a_redelivery_writes_nothing(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    requests: Requests,
) -> None:
    ids = two_lifecycles(world)
    event = batch(stream, projector_filter)
    streams = {r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]}
    assert len(streams) == 4  # two attempts, two proposals
    requests.take()

    assert projector.handler(event, context) == {"batchItemFailures": []}

    ops, queried = requests.take()
    assert sorted(queried) == sorted(streams)  # each stream read once
    assert ops == Counter({"Query": 4, "TransactWriteItems": 1})
    assert ledger.views is not None
    for attempt_id in ids:
        view = ledger.views.get_view(STATUS_VIEW, attempt_id)
        assert view is not None and view.data["status"] == "succeeded"
        assert view.version == world.attempt(attempt_id).version
    requests.take()

    # Delivered again: read again (a record is a hint), nothing written.
    assert projector.handler(event, context) == {"batchItemFailures": []}
    assert requests.take()[0] == Counter({"Query": 4})


def test_a_fresh_container_replaying_an_older_batch_never_regresses_a_view(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    attempt_id = world.approved("provider_idempotency")
    first = batch(stream, projector_filter)  # the approval's records only
    world.worker().process(attempt_id)
    assert projector.handler(batch(stream, projector_filter), context) == {"batchItemFailures": []}
    # A container that knows nothing it wrote: the version guard alone refuses.
    views = getattr(ledger.views, "inner", ledger.views)  # under the change notifier
    assert isinstance(views, DynamoDBViewStore)
    views.known = KnownVersions()

    assert projector.handler(first, context) == {"batchItemFailures": []}

    assert ledger.views is not None
    view = ledger.views.get_view(STATUS_VIEW, attempt_id)
    assert view is not None and view.data["status"] == "succeeded"
    assert view.version == world.attempt(attempt_id).version


def only_broken_failed(
    ledger: Ledger, response: dict[str, Any], event: dict[str, Any], broken: str, fine: str
) -> None:
    """Exactly ``broken``'s records are batch item failures, its view is not
    written, and ``fine`` is projected to its end."""
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {
        r["dynamodb"]["SequenceNumber"]
        for r in event["Records"]
        if r["dynamodb"]["Keys"]["pk"]["S"] == broken
    }
    assert ledger.views is not None
    assert ledger.views.get_view(STATUS_VIEW, broken) is None
    view = ledger.views.get_view(STATUS_VIEW, fine)
    assert view is not None and view.data["status"] == "succeeded"


def test_a_stream_that_cannot_be_folded_fails_only_its_own_records(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken, fine = two_lifecycles(world)
    event = batch(stream, projector_filter)
    rows_of = ledger.projector.rows_of

    def fold(stream_id: str) -> Any:
        if stream_id == broken:
            raise RuntimeError("unreadable")
        return rows_of(stream_id)

    monkeypatch.setattr(ledger.projector, "rows_of", fold)

    only_broken_failed(ledger, projector.handler(event, context), event, broken, fine)


class RefusingRowsOf:
    """A view store whose writes fail while they carry a row of one stream."""

    def __init__(self, inner: Any, stream_id: str) -> None:
        self.inner, self.stream_id = inner, stream_id

    def put_views(self, records: Any, tracking: Any) -> int:
        if any(r.key.startswith(self.stream_id) for r in records):
            raise StoreUnavailable()
        return int(self.inner.put_views(records, tracking))


def test_a_stream_whose_rows_cannot_be_written_fails_only_its_own_records(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken, fine = two_lifecycles(world)
    event = batch(stream, projector_filter)
    monkeypatch.setattr(ledger.projector, "views", RefusingRowsOf(ledger.projector.views, broken))

    only_broken_failed(ledger, projector.handler(event, context), event, broken, fine)


def test_the_webhook_fold_reads_each_stream_once_for_every_subscription(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    context: FakeLambdaContext,
    requests: Requests,
) -> None:
    """Two subscriptions of attempt events: each attempt stream read once, no
    proposal stream read (neither can use one), both records in one write."""
    succeeded = frozenset({NotificationType.ATTEMPT_SUCCEEDED})
    ledger.webhooks = [
        subscription("http://127.0.0.1:9/a", "one", events=succeeded),
        subscription("http://127.0.0.1:9/b", "two", events=succeeded),
    ]
    (attempt_id,) = [world.approved("provider_idempotency")]
    world.worker().process(attempt_id)
    pattern = filter_patterns(load_template()["Resources"]["WebhookFunction"], "LedgerEvents")
    event = batch(stream, pattern)
    requests.take()

    response, _streams, written = webhooks.record_batch(
        ledger.webhook_notifiers(), ledger.store, ledger.views, event, context
    )

    assert response == {"batchItemFailures": []}
    assert written == 2
    ops, queried = requests.take()
    assert queried == [attempt_id]
    assert ops == Counter({"Query": 1, "TransactWriteItems": 1})
    assert ledger.views is not None
    rows, _ = ledger.views.list_views(delivery_list_key("pending"), 10)
    assert {r.data["subscription_id"] for r in rows} == {"one", "two"}
