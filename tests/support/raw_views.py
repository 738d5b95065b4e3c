"""Direct access to stored events, bypassing the ledger: for tampering tests."""

from __future__ import annotations

from typing import Any

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder
from adapters.store import LedgerStore

Row = tuple[int, str, bytes]  # version, topic, state


def read_rows(store: LedgerStore, stream_id: str) -> list[Row]:
    return [
        (e.originator_version, e.topic, bytes(e.state))
        for e in store.recorder.select_events(stream_id)
    ]


def replace_rows(store: LedgerStore, stream_id: str, rows: list[Row]) -> None:
    """Delete the stream's events and write ``rows`` instead, as an attacker would."""
    recorder = store.recorder
    if isinstance(recorder, SQLiteLedgerRecorder):
        table = recorder.events_table_name
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(f"DELETE FROM {table} WHERE originator_id=?", (stream_id,))
            for version, topic, state in rows:
                c.execute(
                    f"INSERT INTO {table} VALUES (?,?,?,?)", (stream_id, version, topic, state)
                )
        return
    if isinstance(recorder, DynamoDBLedgerRecorder):
        client: Any = recorder.client
        for version, _, _ in read_rows(store, stream_id):
            client.delete_item(
                TableName=recorder.table_name,
                Key={"pk": {"S": stream_id}, "sk": {"N": str(version)}},
            )
        for version, topic, state in rows:
            client.put_item(
                TableName=recorder.table_name,
                Item={
                    "pk": {"S": stream_id},
                    "sk": {"N": str(version)},
                    "topic": {"S": topic},
                    "state": {"B": state},
                },
            )
        return
    raise NotImplementedError(type(recorder).__name__)


def event_fields(state: dict[str, Any]) -> dict[str, Any]:
    """The event's own fields in a decoded state, in either stored form (the
    canonical body holds them under ``data``; the library's form at the top)."""
    fields: dict[str, Any] = state["data"] if "stream" in state else state
    return fields


def shift_year(state: dict[str, Any]) -> None:
    """Move the event's timestamp a year back, in either stored form."""
    if isinstance(state["timestamp"], str):
        stamp = state["timestamp"]
        state["timestamp"] = str(int(stamp[:4]) - 1) + stamp[4:]
    else:
        stamp = state["timestamp"]["_data_"]
        state["timestamp"]["_data_"] = str(int(stamp[:4]) - 1) + stamp[4:]
