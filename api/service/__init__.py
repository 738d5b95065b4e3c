"""The service layer of the entry points: every way in calls these functions.

HTTP routers, console pages, ``ledger`` commands and the in-process API
(``api.embedded``) are thin: they turn their input into a request schema and a
:class:`~api.service.principal.Principal`, call one function here, and show
its typed answer. Everything between (role and ownership rules, idempotency
keys and the keys in flight, read-your-writes projection, metrics, refusal
logging, the long-poll wait) lives here once, so the same request has the
same effect and the same record whichever way it came.

One module per resource: ``proposals``, ``decisions`` (approvals and
declines), ``attempts``, ``directory``, ``audit``, ``webhooks``. Nothing here
imports FastAPI.
"""
