"""The Telegram channel: the Bot API over httpx (``bot_api``) and the webhook
that receives updates (``routes``). ``ledger channels telegram serve`` runs it."""
