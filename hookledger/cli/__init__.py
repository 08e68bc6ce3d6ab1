"""The `hookledger` command: operate the ledger, the queue and Gemini from a terminal.

    hookledger [--json] COMMAND …     (every command also takes --json after its name)

Commands: submit, ops list|show, deliveries list|show|replay, reconcile --once,
webhooks register|list|rotate|ping|update, demo, status, installations (GitHub App
installations), console (the web console in a browser), config (the apps' settings),
new NAME (scaffold an app and its test), send SOURCE EVENT PAYLOAD.json (post a signed
webhook to the ingress).
Output is aligned tables for people and one JSON document with `--json`. Exit status:
0 done, 1 failed (one line on stderr), 2 bad arguments (one line on stderr). With a
`demo-` project (the default) the CLI talks to the local stack's emulators; with a real
GOOGLE_CLOUD_PROJECT, to Google Cloud.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

# The apps whose kinds and results the CLI shows, as functions/main.py loads them.
os.environ.setdefault("HOOKLEDGER_APPS", "apps.review")

from hookledger.cli import (
    config_cmd,
    deliveries,
    demo,
    installations,
    new_app,
    ops,
    reconcile_cmd,
    send,
    status,
    webhooks,
)
from hookledger.cli.localenv import apply_local_defaults, check_reachable
from hookledger.cli.output import CliError, Output
from hookledger.console import server as console

PROG = "hookledger"
# The commands that never read the ledger: no Firestore emulator needed to run them.
NO_LEDGER = ("webhooks", "config", "new", "send")


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (try: {self.prog} --help)\n")


def build_parser() -> Parser:
    common = Parser(add_help=False)
    common.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON instead of a table",
    )
    parser = Parser(prog=PROG, description="Operate hookledger: the ledger, the queue, Gemini.")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    commands = (
        ops,
        deliveries,
        reconcile_cmd,
        webhooks,
        demo,
        status,
        installations,
        config_cmd,
        new_app,
        send,
    )
    for module in (*commands, console):
        module.add_parsers(sub, common)
    return parser


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Logs go to whatever sys.stderr is now, so stdout stays clean for --json."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _configure_logs() -> None:
    from shared.logs import JsonFormatter

    root = logging.getLogger("hookledger")
    level = logging.getLevelName(os.environ.get("HOOKLEDGER_LOG_LEVEL", "WARNING").upper())
    if not isinstance(level, int):
        level = logging.WARNING
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler.setLevel(level)
        root.addHandler(handler)
    if root.getEffectiveLevel() > level:
        root.setLevel(level)


def _describe(exc: BaseException) -> str | None:
    """One line for the errors the CLI expects (store, queue, Gemini, network, config)."""
    from google.api_core import exceptions as gexc

    from shared.config import ConfigError
    from shared.gemini import GeminiError
    from shared.handoff.tasks import TasksError
    from shared.ledger import LedgerError
    from shared.signatures import SecretError

    if isinstance(exc, ConfigError | SecretError):
        return f"configuration: {exc}"
    if isinstance(exc, LedgerError | GeminiError | TasksError):
        return str(exc)
    if isinstance(exc, gexc.GoogleAPIError):
        return f"{type(exc).__name__}: {exc}"
    import requests

    if isinstance(exc, requests.RequestException):
        return f"HTTP: {exc}"
    if isinstance(exc, OSError):
        return str(exc)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    out = Output(bool(getattr(args, "json", False)))
    apply_local_defaults(os.environ)
    _configure_logs()
    try:
        if args.command not in NO_LEDGER:
            check_reachable("FIRESTORE_EMULATOR_HOST", os.environ)
        return int(args.func(args, out))
    except CliError as exc:
        Output.error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        Output.error("interrupted")
        return 130
    except Exception as exc:
        message = _describe(exc)
        if message is None:
            raise  # a bug: let the traceback show where
        Output.error(message)
        return 1
