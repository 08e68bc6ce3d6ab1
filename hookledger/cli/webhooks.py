"""`webhooks register|list|rotate`: Gemini's webhooks API through google-genai.

A signing secret is printed once, on stdout, for the user to store (as
GEMINI_WEBHOOK_SECRETS); it is never logged. The webhooks API raises the NextGen
client's errors (`google.genai._interactions.APIError`, with `status_code` on
`APIStatusError`), not `google.genai.errors.APIError`: they are mapped to one line here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hookledger.cli.output import CliError, Output, table
from shared import runtime
from shared.builtin_handlers import DOCUMENTED_EVENTS, UNRELIABLE_EVENTS

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
        dest="webhooks_command", required=True, metavar="{register,list,rotate}"
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


def client() -> Any:
    from shared.gemini import make_client

    cfg = runtime.config()
    return make_client(cfg.gemini_api_key, cfg.gemini_base_url, timeout_s=cfg.http_timeout_s)


@contextmanager
def mapped(what: str, refused: str | None = None) -> Iterator[None]:
    """Turn the webhooks API's errors into one CliError line naming `what`; a 400 is
    said as `refused` when given (e.g. an event the API does not accept)."""
    from google.genai import _interactions as errors

    try:
        yield
    except errors.APIStatusError as exc:
        if refused and exc.status_code == 400:
            raise CliError(f"{what}: {refused}: {_message(exc)}") from exc
        raise CliError(f"{what}: Gemini answered {exc.status_code}: {_message(exc)}") from exc
    except errors.APIError as exc:
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
