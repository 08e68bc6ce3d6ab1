"""`send SOURCE EVENT PAYLOAD.json`: post a recorded webhook to an ingress, signed as its
sender would sign it (hookledger/sending.py).

    hookledger send github push hookledger/testing/payloads/github/push.json
    hookledger send gemini batch.succeeded body.json --delivery msg_1 --ingress URL --json

The secret is the first of GITHUB_WEBHOOK_SECRETS / GEMINI_WEBHOOK_SECRETS (the local
defaults for a `demo-` project); the ingress is `--ingress`, else INGRESS_URL, else
http://127.0.0.1:$INGRESS_PORT (8080). `-` reads the payload from stdin. Prints the
ingress's status, answer and the delivery id. Exit 0 on a 2xx answer; 1 when the ingress
answered otherwise or did not answer; 2 when nothing was sent (a file missing, unreadable
or over the ingress's body limit, an unknown source, a Gemini body whose `type` is not
EVENT).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import requests

from hookledger.cli.localenv import ingress_url
from hookledger.cli.output import CliError, Output, fields_block
from hookledger.sending import SOURCES, SendError, send_event
from shared.config import Config
from shared.errors import ConfigError
from shared.signatures import SecretError


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "send", parents=[common], help="post a recorded webhook to the ingress, signed"
    )
    parser.add_argument("source", metavar="SOURCE", help=f"one of: {', '.join(SOURCES)}")
    parser.add_argument("event", metavar="EVENT", help="push, ping, … or a Gemini body's type")
    parser.add_argument("payload", metavar="PAYLOAD", help="the body's file (sent as is); - stdin")
    parser.add_argument("--delivery", metavar="ID", help="the delivery id (default: a new one)")
    parser.add_argument(
        "--ingress", metavar="URL", help="the ingress (default: INGRESS_URL or :INGRESS_PORT)"
    )
    parser.set_defaults(func=cmd_send)


def body_limit(source: str, config: Config) -> int:
    """What the ingress accepts from `source` (its MAX_BODY_BYTES / MAX_GEMINI_BODY_BYTES)."""
    return config.max_gemini_body_bytes if source == "gemini" else config.max_body_bytes


def read_payload(name: str, limit: int) -> bytes:
    """The bytes of `name` (`-`: stdin); CliError (exit 2) when missing, unreadable or over
    `limit`, read no further than the limit."""
    if name == "-":
        data = sys.stdin.buffer.read(limit + 1)
        where = "stdin"
    else:
        path = Path(name)
        try:
            size = path.stat().st_size
            if size > limit:
                raise CliError(f"{name}: {size} bytes, over the ingress's limit of {limit}", 2)
            with path.open("rb") as file:
                data = file.read(limit + 1)
        except OSError as exc:
            raise CliError(f"{name}: cannot read the payload ({exc.strerror or exc})", 2) from None
        where = name
    if len(data) > limit:
        raise CliError(f"{where}: over the ingress's body limit of {limit} bytes", 2)
    return data


def cmd_send(args: argparse.Namespace, out: Output) -> int:
    if args.source not in SOURCES:  # before reading anything: the limit depends on it
        raise CliError(f"unknown source {args.source!r}; one of: {', '.join(SOURCES)}", 2)
    try:
        config = Config.from_env(os.environ)
    except ConfigError as exc:
        raise CliError(f"configuration: {exc}", 2) from None
    body = read_payload(args.payload, body_limit(args.source, config))
    variable = f"{args.source.upper()}_WEBHOOK_SECRETS"
    secrets = (
        config.github_webhook_secrets if args.source == "github" else config.gemini_webhook_secrets
    )
    if not secrets:  # outside a `demo-` project the local secrets are not the default
        raise CliError(f"{variable} is not set: nothing to sign the {args.source} event with", 2)
    url = (args.ingress or ingress_url(os.environ)).rstrip("/")
    try:
        sent = send_event(
            url, args.source, args.event, body, secret=secrets[0], delivery_id=args.delivery
        )
    except SendError as exc:
        raise CliError(str(exc), 2) from None
    except SecretError as exc:  # signing refused the secret: nothing was sent
        raise CliError(f"configuration: {exc}", 2) from None
    except requests.RequestException as exc:
        raise CliError(
            f"the ingress at {url} does not answer ({type(exc).__name__}); "
            "start the local stack with `make run`, or pass --ingress"
        ) from None
    result = {
        "ingress": f"{url}/{args.source}",
        "source": args.source,
        "event": args.event,
        "delivery_id": sent.delivery_id,
        "status": sent.status,
        "answer": sent.answer,
    }
    out.emit(result, lambda: fields_block(result))
    if not 200 <= sent.status < 300:
        Output.error(f"the ingress at {url}/{args.source} answered {sent.status}")
        return 1
    return 0
