"""The Slack channel: the Web API over httpx (``web_api``) and the
interactivity endpoint with Slack's request signatures (``routes``).
``ledger channels slack serve`` runs it."""
