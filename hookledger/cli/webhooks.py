"""`webhooks register|list|rotate|ping|update`: Gemini's webhooks API through google-genai.

A signing secret is printed once, on stdout, for the user to store (as
GEMINI_WEBHOOK_SECRETS); it is never logged. Every call goes through the SDK's public
`client.webhooks` (create, list, rotate_signing_secret, ping, update). Its errors (the
NextGen client's, with `status_code` and `body`) are read by `shared.gemini.mapped`, never
by importing the SDK's private modules, and said here in one line.

`update ID --enable` re-enables a webhook Gemini disabled after failed deliveries
(`disabled_due_to_failed_deliveries`); only the fields given are sent, named in the
update mask.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hookledger.cli.output import CliError, Output, table
from shared.entrypoints import runtime
from shared.gemini import GeminiError
from shared.gemini import mapped as gemini_mapped
from shared.handlers.builtin import DOCUMENTED_EVENTS, UNRELIABLE_EVENTS

# The events the webhooks API reference lists (CreateWebhook `subscribed_events`), the
# default; the two `*.cancelled` ones the Webhooks guide still names may be asked for, but
# google-genai's enums dropped them and the API may refuse them (reported as such).
DEFAULT_EVENTS = DOCUMENTED_EVENTS
EVENTS = (*DOCUMENTED_EVENTS, *UNRELIABLE_EVENTS)
DISABLED = "disabled_due_to_failed_deliveries"
STORE_HINT = "store it now (GEMINI_WEBHOOK_SECRETS); it is not shown again"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    hooks = sub.add_parser("webhooks", help="Gemini webhook registrations")
    hsub = hooks.add_subparsers(
        dest="webhooks_command", required=True, metavar="{register,list,rotate,ping,update}"
    )
    register = hsub.add_parser("register", parents=[common], help="register a webhook")
    register.add_argument("--uri", required=True, help="where Gemini sends events (https)")
    register.add_argument(
        "--events",
        nargs="+",
        choices=EVENTS,
        default=list(DEFAULT_EVENTS),
        metavar="EVENT",
        help=f"events to subscribe to (default: {' '.join(DEFAULT_EVENTS)})",
    )
    register.add_argument("--name", help="an optional label")
    register.set_defaults(func=cmd_register)
    listing = hsub.add_parser("list", parents=[common], help="registered webhooks")
    listing.set_defaults(func=cmd_list)
    rotate = hsub.add_parser("rotate", parents=[common], help="issue a new signing secret")
    rotate.add_argument("id", help="the webhook id")
    rotate.add_argument(
        "--revoke-now",
        action="store_true",
        help="revoke the previous secrets at once (default: after 24 h)",
    )
    rotate.set_defaults(func=cmd_rotate)
    ping = hsub.add_parser("ping", parents=[common], help="have Gemini send a ping event")
    ping.add_argument("id", help="the webhook id")
    ping.set_defaults(func=cmd_ping)
    update = hsub.add_parser(
        "update", parents=[common], help="re-enable, disable, move or resubscribe a webhook"
    )
    update.add_argument("id", help="the webhook id")
    state = update.add_mutually_exclusive_group()
    state.add_argument(
        "--enable",
        action="store_const",
        const="enabled",
        dest="state",
        help="enable it (also after Gemini disabled it for failed deliveries)",
    )
    state.add_argument(
        "--disable", action="store_const", const="disabled", dest="state", help="disable it"
    )
    update.add_argument("--uri", help="send its events here instead (https)")
    update.add_argument(
        "--events",
        nargs="+",
        choices=EVENTS,
        metavar="EVENT",
        help="replace its subscribed events",
    )
    update.set_defaults(func=cmd_update)


def client() -> Any:
    from shared.gemini import make_client

    cfg = runtime.config()
    return make_client(cfg.gemini_api_key, cfg.gemini_base_url, timeout_s=cfg.http_timeout_s)


@contextmanager
def mapped(what: str, refused: str | None = None) -> Iterator[None]:
    """Turn the webhooks API's errors into one CliError line naming `what`; a 400 is
    said as `refused` when given (e.g. an event the API does not accept)."""
    try:
        with gemini_mapped(what):
            yield
    except GeminiError as exc:
        cause = exc.__cause__
        if refused and getattr(cause, "status_code", None) == 400:
            raise CliError(f"{what}: {refused}: {_message(cause)}") from exc
        raise CliError(str(exc)) from exc
    except Exception as exc:
        # Any other error the SDK raises (e.g. an answer it cannot parse): still one line.
        if not type(exc).__module__.startswith("google.genai"):
            raise
        raise CliError(f"{what}: {type(exc).__name__}: {exc}") from exc


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message") or exc)
    return str(exc)


def describe(hook: Any) -> dict[str, Any]:
    """The fields worth showing; secrets only as Gemini truncates them."""
    secrets = [
        {"truncated_secret": s.truncated_secret, "expire_time": s.expire_time}
        for s in hook.signing_secrets or []
    ]
    return {
        "id": hook.id,
        "name": hook.name,
        "uri": hook.uri,
        "subscribed_events": list(hook.subscribed_events or []),
        "state": hook.state,
        "create_time": hook.create_time,
        "update_time": hook.update_time,
        "signing_secrets": secrets,
        "disabled_due_to_failed_deliveries": hook.state == DISABLED,
    }


def all_webhooks(api: Any) -> list[Any]:
    hooks: list[Any] = []
    token = None
    while True:
        page = api.webhooks.list(page_size=100, page_token=token)
        hooks.extend(page.webhooks or [])
        token = page.next_page_token
        if not token:
            return hooks


def cmd_register(args: argparse.Namespace, out: Output) -> int:
    api = client()
    events = list(dict.fromkeys(args.events))
    what = f"registering a webhook for {args.uri} (events: {', '.join(events)})"
    with mapped(what, refused=f"Gemini refused the subscription to {', '.join(events)}"):
        hook = api.webhooks.create(uri=args.uri, subscribed_events=events, name=args.name)
    return _print_secret(out, describe(hook), hook.new_signing_secret, "registered webhook")


def cmd_rotate(args: argparse.Namespace, out: Output) -> int:
    api = client()
    behavior = (
        "revoke_previous_secrets_immediately"
        if args.revoke_now
        else "revoke_previous_secrets_after_h24"
    )
    with mapped(f"rotating the secret of webhook {args.id}"):
        answer = api.webhooks.rotate_signing_secret(args.id, revocation_behavior=behavior)
    return _print_secret(
        out, {"id": args.id, "revocation_behavior": behavior}, answer.secret, "rotated webhook"
    )


def cmd_ping(args: argparse.Namespace, out: Output) -> int:
    api = client()
    with mapped(f"pinging webhook {args.id}"):
        api.webhooks.ping(args.id)
    data = {"id": args.id, "pinged": True}
    out.emit(data, lambda: f"Gemini sent a ping event to webhook {args.id}")
    return 0


def cmd_update(args: argparse.Namespace, out: Output) -> int:
    changes: dict[str, Any] = {}
    if args.state:
        changes["state"] = args.state
    if args.uri:
        changes["uri"] = args.uri
    if args.events:
        changes["subscribed_events"] = list(dict.fromkeys(args.events))
    if not changes:
        raise CliError("webhooks update: give --enable, --disable, --uri or --events", code=2)
    api = client()
    what = f"updating webhook {args.id} ({', '.join(sorted(changes))})"
    # The mask names exactly the fields sent, so nothing else of the webhook changes.
    with mapped(what, refused="Gemini refused the change"):
        hook = api.webhooks.update(args.id, update_mask=",".join(changes), **changes)
    row = describe(hook)

    def human() -> str:
        line = f"updated webhook {row['id']}: {row['state']}, {row['uri']}"
        return f"{line}\nevents: {' '.join(row['subscribed_events'])}"

    out.emit(row, human)
    return 0


def _print_secret(out: Output, data: dict[str, Any], secret: str | None, what: str) -> int:
    if not secret:
        raise CliError(f"{what} {data.get('id')}: Gemini returned no signing secret")
    data = {**data, "signing_secret": secret}
    human: Callable[[], str] = lambda: (  # noqa: E731
        f"{what} {data['id']}\nsigning secret: {secret}\n{STORE_HINT}"
    )
    out.emit(data, human)
    return 0


def cmd_list(args: argparse.Namespace, out: Output) -> int:
    api = client()
    with mapped("listing webhooks"):
        rows = [describe(hook) for hook in all_webhooks(api)]

    def human() -> str:
        if not rows:
            return "no webhooks registered"
        for row in rows:
            row["alert"] = (
                "DISABLED: deliveries kept failing"
                if row["disabled_due_to_failed_deliveries"]
                else ""
            )
        columns = [
            ("ID", "id"),
            ("NAME", "name"),
            ("STATE", "state"),
            ("EVENTS", "subscribed_events"),
            ("URI", "uri"),
            ("ALERT", "alert"),
        ]
        lines = [table(rows, columns)]
        for row in rows:
            if row["disabled_due_to_failed_deliveries"]:
                lines.append(
                    f"webhook {row['id']} is {DISABLED}: Gemini stopped sending to "
                    f"{row['uri']}; fix the endpoint, then re-enable it"
                )
        return "\n".join(lines)

    out.emit(rows, human)
    return 0
