"""``ledger mcp``: the ledger as an MCP server, and a gateway in front of
downstream MCP servers (docs/mcp.md).

The tools ``list_capabilities``, ``propose_action`` and ``get_action_status``
call the same service functions as every other entry point (``api.service``,
I16), in this process: the MCP server is one more entry point of the ledger
it opens, not a client of its HTTP API. Each gated tool of a downstream
server (``[[mcp]]`` in the executors file) is listed as a tool of its own
whose call becomes a proposal; the ``mcp`` executor calls the real tool once,
after approval. Presentation tokens go only to the configured presenter (the
actor's channel), never to the agent.
"""
