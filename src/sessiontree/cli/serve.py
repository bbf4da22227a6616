"""``sessiontree serve``: the local web viewer (docs/viewer.md).

The command parses its options, opens the store and runs
:func:`sessiontree.web.app.create_app` under uvicorn. Binding anything but a
loopback address needs ``--expose``; the server then prints a warning and
requires a token it generates (printed once, in the URL to open).
"""

from __future__ import annotations

import ipaddress
import secrets

import click

from sessiontree.cli.common import App, UserError, cli, echo_line, pass_app

_LOOPBACK_NAMES = {"localhost"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (``127.0.0.1``, ``::1``, ``[::1]``)."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@cli.command("serve", short_help="Browse sessions in a local web viewer.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback needs --expose and a token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port).")
@click.option("--expose", is_flag=True,
              help="Allow a non-loopback --host: prints a warning and requires a generated token; "
                   "sessions are shown redacted by default (a toggle on each page).")
@click.option("--token", "token_opt", default=None, metavar="TOKEN",
              help="Use this token instead of generating one (also on loopback).")
@pass_app
def serve_cmd(app: App, host: str, port: int, expose: bool, token_opt: str | None) -> None:
    """Serve a read-only web viewer of the store's sessions (Ctrl-C stops it).

    The list page searches and filters sessions; a session page draws the
    entry tree and the conversation of the selected branch, raw or as the
    model sees it, and follows a session that grows.
    """
    import socket

    import uvicorn

    from sessiontree.web.app import ViewerConfig, create_app

    loopback = is_loopback(host)
    if not loopback and not expose:
        raise UserError(f"--host {host} is not a loopback address; add --expose to serve other machines "
                        "(a token will be required)")
    # --expose asks for a token whatever the address (its --help says so): on loopback too,
    # where a port forward or another local user can reach the server.
    token = token_opt or (secrets.token_urlsafe(24) if expose or not loopback else None)
    store = app.store  # opened now: a missing store is an error before the server starts
    sock = socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    # Exposed: sessions are shown redacted unless the reader turns the toggle off (docs/secrets.md).
    config = ViewerConfig(host=host.strip("[]"), port=port, token=token, redact=expose)
    shown = f"[{config.host}]" if ":" in config.host else config.host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    if not loopback:
        echo_line(f"WARNING: serving sessions to the network on {host}:{port}. Anyone with the token can "
                  "read every session in the store; traffic is not encrypted.", err=True)
    echo_line(f"Serving {store.url} at {url}", err=True)
    echo_line("Press Ctrl-C to stop.", err=True)
    server = uvicorn.Server(uvicorn.Config(create_app(store, config), log_level="warning",
                                           access_log=False, server_header=False))
    server.run(sockets=[sock])
