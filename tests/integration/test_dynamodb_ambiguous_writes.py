"""A lost response must never turn into a second write or a false conflict.

The fault wrapper sends the real request to the emulator and then raises a
timeout, exactly what a client sees when DynamoDB applied the write but the
answer was lost.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.recorder import StreamConflictError
from domain.ports import DueWork, Lookup
from tests.support.dynamodb_events import at, event, new_stream
from tests.support.faults import Method, ScriptedFaultClient, before, lost_response, not_sent

pytestmark = pytest.mark.dynamodb

ROUNDS = 50


def recorder_on(client: Any, table: str) -> DynamoDBLedgerRecorder:
    return DynamoDBLedgerRecorder(table, client, sleep=lambda _: None)


def fresh_token(method: Method, kwargs: dict[str, Any]) -> Any:
    """What a client without a stable token would send on its retry."""
    return method(**{**kwargs, "ClientRequestToken": uuid.uuid4().hex})


@pytest.mark.slow
def test_transaction_resent_with_its_token_after_a_lost_response_applies_once(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    for rnd in range(ROUNDS):
        a, b = new_stream(), new_stream()
        client = ScriptedFaultClient(dynamodb_client, transact_write_items=[lost_response])
        recorder_on(client, dynamodb_table_name).insert_events(
            [event(a, 1), event(b, 1)],
            lookups=[Lookup(f"token-{a}", {"round": str(rnd)})],
            due=[DueWork(f"att-{a}", at(rnd))],
        )
        calls = [kwargs for name, kwargs in client.calls if name == "transact_write_items"]
        assert len(calls) == 2
        assert calls[0]["ClientRequestToken"] == calls[1]["ClientRequestToken"]
        reader = recorder_on(dynamodb_client, dynamodb_table_name)
        assert [e.originator_version for e in reader.select_events(a)] == [1]
        assert [e.originator_version for e in reader.select_events(b)] == [1]
        assert reader.get_lookup(f"token-{a}") == {"round": str(rnd)}


def test_without_the_same_token_the_resend_is_misreported_as_a_conflict(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    """The control: the same lost response, but the retry carries a new token."""
    a, b = new_stream(), new_stream()
    client = ScriptedFaultClient(dynamodb_client, transact_write_items=[lost_response, fresh_token])
    with pytest.raises(StreamConflictError):
        recorder_on(client, dynamodb_table_name).insert_events([event(a, 1), event(b, 1)])


@pytest.mark.slow
@pytest.mark.parametrize("same_token", [True, False])
def test_a_resent_transaction_cannot_undo_a_later_commit(
    dynamodb_client: Any, dynamodb_table_name: str, same_token: bool
) -> None:
    """Due-work puts have no condition: resending an already-applied commit after
    someone else moved the entry on would silently undo their change. The token
    makes the resend a no-op; without it, the later change is lost."""
    later = recorder_on(dynamodb_client, dynamodb_table_name)
    lost = 0
    for rnd in range(ROUNDS if same_token else 5):
        attempt, other = f"att-{rnd}-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"

        def move_on(attempt: str = attempt) -> None:
            later.insert_events([], due=[DueWork(attempt, at(3600)), DueWork("keep", at(1))])

        resend = before(move_on) if same_token else before(move_on, fresh_token)
        client = ScriptedFaultClient(dynamodb_client, transact_write_items=[lost_response, resend])
        recorder_on(client, dynamodb_table_name).insert_events(
            [], due=[DueWork(attempt, at(10)), DueWork(other, at(10))]
        )
        due = {d.attempt_id: d.next_action_at for d in later.select_due(at(7200), 1000)[0]}
        lost += due[attempt] != at(3600)
    assert lost == (0 if same_token else 5)


@pytest.mark.slow
def test_conditional_put_resent_after_a_lost_response_finds_its_own_item(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    for _ in range(ROUNDS):
        stream = new_stream()
        client = ScriptedFaultClient(dynamodb_client, put_item=[lost_response])
        recorder_on(client, dynamodb_table_name).insert_events([event(stream, 1)])
        assert client.count("put_item") == 2
        stored = recorder_on(dynamodb_client, dynamodb_table_name).select_events(stream)
        assert [(e.originator_version, e.state) for e in stored] == [(1, f"{stream}@1".encode())]


def without_old_item(method: Method, kwargs: dict[str, Any]) -> Any:
    """An endpoint that ignores ReturnValuesOnConditionCheckFailure."""
    try:
        return method(**kwargs)
    except ClientError as exc:
        exc.response.pop("Item", None)
        raise


def test_conditional_put_rereads_the_item_when_the_failure_carries_none(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    stream = new_stream()
    client = ScriptedFaultClient(dynamodb_client, put_item=[lost_response, without_old_item])
    recorder_on(client, dynamodb_table_name).insert_events([event(stream, 1)])
    assert client.count("get_item") == 1
    assert len(recorder_on(dynamodb_client, dynamodb_table_name).select_events(stream)) == 1


def test_conditional_put_resent_after_a_lost_request_reports_a_real_conflict(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    """Our request never arrived; a competitor took the slot meanwhile."""
    competitor = recorder_on(dynamodb_client, dynamodb_table_name)
    for _ in range(ROUNDS):
        stream = new_stream()

        def compete(stream: str = stream) -> None:
            competitor.insert_events([event(stream, 1, b"competitor")])

        down = not_sent(EndpointConnectionError(endpoint_url="http://dynamodb.invalid"))
        client = ScriptedFaultClient(dynamodb_client, put_item=[before(compete, down)])
        with pytest.raises(StreamConflictError):
            recorder_on(client, dynamodb_table_name).insert_events([event(stream, 1)])
        assert [e.state for e in competitor.select_events(stream)] == [b"competitor"]


def botocore_resent(method: Method, kwargs: dict[str, Any]) -> Any:
    """What a client with botocore's own retries reports: it lost the first
    response, resent the request itself, and surfaces the resend's answer."""
    method(**kwargs)
    try:
        return method(**kwargs)
    except ClientError as exc:
        exc.response.setdefault("ResponseMetadata", {})["RetryAttempts"] = 1
        raise


def test_conditional_put_resent_by_botocore_itself_is_not_a_false_conflict(
    dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    stream = new_stream()
    client = ScriptedFaultClient(dynamodb_client, put_item=[botocore_resent])
    recorder_on(client, dynamodb_table_name).insert_events([event(stream, 1)])
    assert len(recorder_on(dynamodb_client, dynamodb_table_name).select_events(stream)) == 1
