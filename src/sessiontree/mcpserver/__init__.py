"""``sessiontree mcp``: agents search and read stored sessions over the Model Context Protocol (docs/mcp.md).

Sits at the edge, beside :mod:`sessiontree.web`: it imports the layers below
(search, usage, session, stores, core) and nothing imports it but the command
line. :mod:`~sessiontree.mcpserver.tools` computes each tool's answer as plain
data, :mod:`~sessiontree.mcpserver.paging` cuts it into pages within a size
budget, :mod:`~sessiontree.mcpserver.server` exposes both through the official
``mcp`` SDK over stdio or streamable HTTP. Read-only throughout.
"""
