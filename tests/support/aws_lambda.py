"""Lambda handlers in-process: a fake Lambda context, a ledger wired on a recorder
(and the handlers pointed at it), the table's DynamoDB Streams records shaped as
Lambda delivers them, EMF metrics."""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from adapters.aws_lambda import common
from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import load_settings
from tests.support.clocks import FixedClock


@dataclass
class FakeLambdaContext:
    """The attributes of a Lambda context that Powertools reads."""

    function_name: str = "ledger-test"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:ledger-test"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def wire(recorder: Any, clock: FixedClock | None = None, **settings: Any) -> Ledger:
    """A ledger on ``recorder`` with the fake executors and a hand-moved clock."""
    return build_ledger(
        load_settings(store="memory", env="test", **settings),
        clock=clock or FixedClock(),
        recorder=recorder,
    )


def use_ledger(monkeypatch: pytest.MonkeyPatch, ledger: Ledger | None = None) -> None:
    """For this test the Lambda handlers use ``ledger``; without one, they build
    their own from the environment on first use, as at a cold start."""
    build = common.ledger_from_environment if ledger is None else (lambda: ledger)
    monkeypatch.setattr(common, "environment_ledger", common.BuiltOnce(build))


def fresh_api_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """For this test the API function builds its app again (on the handlers' ledger)."""
    from api import aws_lambda as api_lambda

    monkeypatch.setattr(
        api_lambda, "environment_app", common.BuiltOnce(api_lambda.app_from_environment)
    )


def use_s3(monkeypatch: pytest.MonkeyPatch, client: Any) -> None:
    """For this test the checkpoint function writes through ``client``."""
    from adapters.aws_lambda import checkpoint

    monkeypatch.setattr(checkpoint, "environment_s3", common.BuiltOnce(lambda: client))


def _plain(value: Any) -> Any:
    """boto3's parsed values back to the JSON Lambda delivers (B as base64, time as epoch)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime):
        return int(value.timestamp())
    raise TypeError(type(value).__name__)


@dataclass
class StreamTap:
    """Reads the table's stream from the start, as Lambda's poller would."""

    client: Any
    arn: str
    seen: list[dict[str, Any]] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        """Every record so far, shaped like the records of a Lambda event."""
        shards = self.client.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        found: list[dict[str, Any]] = []
        for shard in shards:
            iterator = self.client.get_shard_iterator(
                StreamArn=self.arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for _ in range(100):  # bounded: an emulator answers all it has at once
                answer = self.client.get_records(ShardIterator=iterator, Limit=1000)
                found.extend(answer.get("Records", []))
                iterator = answer.get("NextShardIterator")
                if not answer.get("Records") or iterator is None:
                    break
        shaped = [json.loads(json.dumps(r, default=_plain)) for r in found]
        for record in shaped:
            record["eventSourceARN"] = self.arn
        return shaped


def emitted_metrics(output: str) -> list[dict[str, Any]]:
    """(name, value, dimensions) of every EMF metric printed to stdout."""
    found: list[dict[str, Any]] = []
    for line in output.splitlines():
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        if not isinstance(blob, dict) or "_aws" not in blob:
            continue
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            dimensions = {d: blob[d] for group in directive["Dimensions"] for d in group}
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                found.append(
                    {
                        "name": metric["Name"],
                        "namespace": directive["Namespace"],
                        "value": sum(value) if isinstance(value, list) else value,
                        "dimensions": dimensions,
                    }
                )
    return found


def metric_total(output: str, name: str, **dimensions: str) -> float:
    return float(
        sum(
            m["value"]
            for m in emitted_metrics(output)
            if m["name"] == name and all(m["dimensions"].get(k) == v for k, v in dimensions.items())
        )
    )


def without_image(record: dict[str, Any], sequence: str) -> dict[str, Any]:
    """A malformed copy of a record: no NewImage, its own sequence number."""
    broken = copy.deepcopy(record)
    del broken["dynamodb"]["NewImage"]
    broken["dynamodb"]["SequenceNumber"] = sequence
    return broken
