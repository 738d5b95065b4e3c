"""``PERSISTENCE_MODULE=adapters.dynamodb`` for eventsourcing applications.

Only aggregate recorders are offered (events and snapshots). An application
recorder needs a gap-free global notification log, which on DynamoDB is one
hot key every write must touch; the ledger feeds its projections from
DynamoDB Streams instead. An application therefore overrides
``construct_recorder`` to use ``factory.aggregate_recorder()`` (see
docs/dynamodb.md).

Environment (application-prefixed names work as usual):
``DYNAMODB_TABLE`` (required), ``CREATE_TABLE`` (default yes),
``DYNAMODB_DUE_BUCKETS`` (default 16). The endpoint, region and credentials
come from boto3's own configuration (``AWS_ENDPOINT_URL_DYNAMODB``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    InfrastructureFactoryError,
    ProcessRecorder,
    TrackingRecorder,
)
from eventsourcing.utils import Environment, EnvType, strtobool

if TYPE_CHECKING:
    from adapters.dynamodb.client import DynamoDBClient
    from adapters.dynamodb.recorder import DynamoDBLedgerRecorder

_NOT_OFFERED = (
    "adapters.dynamodb offers aggregate recorders only: a global notification log "
    "would be a hot key on DynamoDB (use DynamoDB Streams, or another persistence "
    "module for {what})"
)


class Factory(InfrastructureFactory[TrackingRecorder]):
    """Builds DynamoDB aggregate recorders; the client is created on first use."""

    DYNAMODB_TABLE = "DYNAMODB_TABLE"
    CREATE_TABLE = "CREATE_TABLE"
    DYNAMODB_DUE_BUCKETS = "DYNAMODB_DUE_BUCKETS"

    def __init__(
        self, env: Environment | EnvType | None, *, client: DynamoDBClient | None = None
    ) -> None:
        super().__init__(env)
        self._client = client
        self._owns_client = client is None
        self._table_ready = False

    @property
    def client(self) -> DynamoDBClient:
        if self._client is None:
            from adapters.dynamodb.client import make_client

            self._client = make_client()
        return self._client

    @property
    def table_name(self) -> str:
        name = self.env.get(self.DYNAMODB_TABLE)
        if not name:
            raise InfrastructureFactoryError(f"{self.DYNAMODB_TABLE} is not set")
        return name

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        from adapters.dynamodb.items import SNAPSHOT_PREFIX
        from adapters.dynamodb.recorder import DynamoDBLedgerRecorder

        table_name = self.table_name
        self._ensure_table(table_name)
        recorder: DynamoDBLedgerRecorder = DynamoDBLedgerRecorder(
            table_name=table_name,
            client=self.client,
            due_buckets=int(self.env.get(self.DYNAMODB_DUE_BUCKETS, "16")),
            key_prefix=SNAPSHOT_PREFIX if purpose == "snapshots" else "",
        )
        return recorder

    def _ensure_table(self, table_name: str) -> None:
        if self._table_ready or not strtobool(self.env.get(self.CREATE_TABLE, "yes")):
            return
        from adapters.dynamodb.schema import create_table

        create_table(self.client, table_name)
        self._table_ready = True

    def application_recorder(self) -> ApplicationRecorder:
        raise InfrastructureFactoryError(_NOT_OFFERED.format(what="application recorders"))

    def tracking_recorder(
        self, tracking_recorder_class: type[TrackingRecorder] | None = None
    ) -> TrackingRecorder:
        raise InfrastructureFactoryError(_NOT_OFFERED.format(what="tracking recorders"))

    def process_recorder(self) -> ProcessRecorder:
        raise InfrastructureFactoryError(_NOT_OFFERED.format(what="process recorders"))

    def close(self) -> None:
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None
        super().close()
