"""`hookledger console`: serve the console on loopback (or elsewhere, with a token)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hookledger.cli.output import CliError, Output
from hookledger.console.security import is_loopback
from shared.entrypoints import runtime

DEFAULT_PORT = 8099


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("console", parents=[common], help="the web console (a browser UI)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("CONSOLE_PORT") or DEFAULT_PORT),
        help=f"port (default $CONSOLE_PORT or {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--token", help="access token every request must carry; required off loopback"
    )
    parser.set_defaults(func=cmd_console)


def cmd_console(args: argparse.Namespace, out: Output) -> int:
    serve(args.host, args.port, args.token, out)
    return 0


def serve(host: str, port: int, token: str | None, out: Output | None = None) -> None:
    """Serve until interrupted. Refuses a non-loopback `host` without a `token`."""
    from werkzeug.serving import make_server

    from hookledger.console.app import create_app

    if not is_loopback(host) and not token:
        raise CliError(f"binding {host} exposes the ledger: give --token to require one", 2)
    if not 1 <= port <= 65535:
        raise CliError(f"port must be in 1..65535, got {port}", 2)
    app = create_app(runtime.ledger, token=token)
    server = make_server(host, port, app, threaded=True)
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{server.server_port}/"
    message = f"hookledger console listening on {url}"
    if out is not None:
        out.emit({"url": url, "token_required": bool(token)}, lambda: message)
    else:
        print(message)
    sys.stdout.flush()  # `make run` waits for this line on a pipe
    try:
        server.serve_forever()
    finally:
        server.server_close()
