"""Calling the MCP server's tools in process, for the tests of every package that answer through it."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

from sessiontree import open_store
from sessiontree.mcpserver.server import build_server


def call_tools(db: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Call each tool in process (the SDK's client over its in-memory transport); the results in order.

    Args:
        db: the store's URL or SQLite path, opened read-only.
        calls: ``(tool name, arguments)`` pairs, called one after another.
    """
    store = open_store(db, create=False, readonly=True)

    async def main() -> list[Any]:
        async with Client(build_server(store)) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    try:
        return anyio.run(main)
    finally:
        store.close()
