"""Chat channels for the execution ledger: Telegram and Slack approvals.

Each channel is a service of its own (``ledger channels telegram serve``,
``ledger channels slack serve``) on top of the ledger's public HTTP API,
through the Python client (``ledger_client``). It imports nothing of the
ledger's server: what it does, another channel can do in any language
(docs/channels.md).

- ``channels.service``: what every channel does (the intake of presentations,
  a press of Approve or Decline, the ledger's webhooks, the message outbox);
- ``channels.state``: its own small SQLite file (presentations with their
  tokens sealed, messages, what each message shows);
- ``channels.telegram`` and ``channels.slack``: the platforms.
"""
