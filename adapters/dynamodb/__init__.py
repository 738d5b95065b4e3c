"""DynamoDB backend: recorder, table schema, commit builder, eventsourcing factory.

Importing this package builds no client and touches no network; only the
small :class:`Factory` is imported here (the eventsourcing library looks for
it in this module's namespace when ``PERSISTENCE_MODULE=adapters.dynamodb``).
"""

from adapters.dynamodb.factory import Factory

__all__ = ["Factory"]
