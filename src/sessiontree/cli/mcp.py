"""``sessiontree mcp``: the MCP server for agents (docs/mcp.md).

Opens the store read-only (every command not listed in ``STORE_MODES`` does)
and serves :func:`sessiontree.mcpserver.server.build_server` over stdio, or
with ``--http`` over streamable HTTP on loopback. As with ``serve``, a
non-loopback ``--host`` needs ``--expose`` and then a bearer token, generated
unless ``--token`` gives one; a token may also be required on loopback.
Nothing but the protocol goes to stdout in stdio mode: messages go to stderr.
"""

from __future__ import annotations

import secrets
from typing import Any

import click

from sessiontree.cli.common import App, UserError, cli, echo_line, pass_app
from sessiontree.cli.serve import is_loopback


def _server_module() -> Any:
    """:mod:`sessiontree.mcpserver.server`, or a clear error when the SDK (the ``mcp`` extra) is missing."""
    try:
        from sessiontree.mcpserver import server
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise UserError("sessiontree mcp needs the MCP SDK: pip install 'sessiontree[mcp]'") from None
    return server


@cli.command("mcp", short_help="Serve the sessions to agents over the Model Context Protocol.")
@click.option("--http", "use_http", is_flag=True,
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind with --http. Anything but loopback needs --expose and a token.")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on with --http (0: any free port).")
@click.option("--expose", is_flag=True,
              help="Allow a non-loopback --host: prints a warning and requires a bearer token.")
@click.option("--token", "token_opt", default=None, metavar="TOKEN",
              help="Require this bearer token (default with --expose: a generated one, printed once).")
@pass_app
def mcp_cmd(app: App, use_http: bool, host: str, port: int, expose: bool, token_opt: str | None) -> None:
    """Serve the store's sessions to agents over MCP, read-only (stdio by default).

    Tools: search_sessions, list_sessions, get_session, get_context,
    get_entries, usage_stats, diff_branches. Add it to an agent as the command
    `sessiontree mcp` (with --store if needed); see docs/mcp.md.
    """
    import anyio

    build_server = _server_module().build_server
    if not use_http:
        for name, given in (("--host", host != "127.0.0.1"), ("--port", port != 8766), ("--expose", expose),
                            ("--token", token_opt is not None)):
            if given:
                raise click.UsageError(f"{name} needs --http (stdio is the default transport)")
        server = build_server(app.store)  # opened now: a missing store is an error before serving
        anyio.run(server.run_stdio_async)
        return
    _serve_http(app, host, port, expose, token_opt)


def _serve_http(app: App, host: str, port: int, expose: bool, token_opt: str | None) -> None:
    import socket

    import uvicorn

    module = _server_module()
    bare = host.strip("[]")
    loopback = is_loopback(host)
    if not loopback and not expose:
        raise UserError(f"--host {host} is not a loopback address; add --expose to serve other machines "
                        "(a bearer token will be required)")
    if token_opt is not None and not token_opt.strip():
        raise UserError("--token must not be empty")
    token = token_opt or (None if loopback else secrets.token_urlsafe(24))
    server = module.build_server(app.store)
    sock = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    # Listening now, before the address is printed: a client that connects at once waits in the
    # backlog until uvicorn accepts, instead of being refused.
    sock.listen(128)
    port = sock.getsockname()[1]
    shown = f"[{bare}]" if ":" in bare else bare
    if not loopback:
        echo_line(f"WARNING: serving sessions to the network on {host}:{port}. Anyone with the token can "
                  "read every session in the store; traffic is not encrypted.", err=True)
    echo_line(f"MCP server for {app.store.url} at http://{shown}:{port}/mcp", err=True)
    if token_opt is None and token is not None:
        echo_line(f"Bearer token (send as 'Authorization: Bearer TOKEN'): {token}", err=True)
    echo_line("Press Ctrl-C to stop.", err=True)
    asgi = module.http_app(server, host=bare, loopback=loopback, token=token)
    uvicorn.Server(uvicorn.Config(asgi, log_level="warning", access_log=False, server_header=False,
                                  lifespan="on")).run(sockets=[sock])
