"""`submit`, `ops list`, `ops show`: Gemini batch jobs and what the ledger holds about them."""

from __future__ import annotations

import argparse
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from hookledger.cli.output import CliError, Output, fields_block, table
from shared.entrypoints import runtime
from shared.ledger import OPERATION_STATUSES

DEFAULT_MODEL = "models/gemini-2.5-flash"
_KIND = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
LIST_COLUMNS = [
    ("NAME", "name"),
    ("APP", "app"),
    ("KIND", "kind"),
    ("STATUS", "status"),
    ("BY", "settled_by"),
    ("SUBMITTED", "submitted_at"),
    ("SETTLED", "settled_at"),
    ("ATTEMPTS", "attempts"),
]


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    submit = sub.add_parser(
        "submit", parents=[common], help="create a Gemini batch and register it"
    )
    what = submit.add_mutually_exclusive_group(required=True)
    what.add_argument("--kind", help="the operation kind recorded in the ledger")
    what.add_argument("--app", help="an app's own submission (e.g. classify; needs --input)")
    submit.add_argument("--model", help="the Gemini model (default: REVIEW_MODEL)")
    source = submit.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", action="append", metavar="TEXT", help="one request (repeat)")
    source.add_argument(
        "--file",
        type=Path,
        help='JSON lines: {"key": …, "prompt": …}; over 20 MB they are sent as an uploaded file',
    )
    source.add_argument("--input", type=Path, help="with --app: JSON lines, one item each")
    submit.add_argument("--id", help="with --app: the submission id (default: a new one)")
    submit.set_defaults(func=cmd_submit)

    ops = sub.add_parser("ops", help="operations in the ledger")
    ops_sub = ops.add_subparsers(dest="ops_command", required=True, metavar="{list,show}")
    listing = ops_sub.add_parser("list", parents=[common], help="operations, newest first")
    listing.add_argument("--status", choices=OPERATION_STATUSES)
    listing.add_argument("--kind")
    listing.add_argument("--limit", type=limit_arg, default=50)
    listing.set_defaults(func=cmd_list)
    show = ops_sub.add_parser("show", parents=[common], help="every stored field of one operation")
    show.add_argument("name", help="full name (batches/abc) or bare id (abc)")
    show.set_defaults(func=cmd_show)


def limit_arg(text: str) -> int:
    """An argparse type: an integer in 1..1000."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000, got {value}")
    return value


# --------------------------------------------------------------------------- submit


def read_requests(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(key, prompt) pairs from `--prompt`s or the JSON-lines `--file`; CliError names the line."""
    if args.prompt:
        if any(not text.strip() for text in args.prompt):
            raise CliError("--prompt must not be empty", code=2)
        return [(f"prompt-{i}", text) for i, text in enumerate(args.prompt, start=1)]
    path: Path = args.file
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from exc
    requests: list[tuple[str, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise CliError(f"{path}:{number}: not a JSON object") from None
        if not isinstance(item, dict):
            raise CliError(f"{path}:{number}: not a JSON object")
        key, prompt = item.get("key"), item.get("prompt")
        if not isinstance(key, str) or not key or not isinstance(prompt, str) or not prompt:
            raise CliError(f'{path}:{number}: needs non-empty string "key" and "prompt"')
        if any(key == seen for seen, _ in requests):
            raise CliError(f"{path}:{number}: key {key!r} appears twice")
        requests.append((key, prompt))
    if not requests:
        raise CliError(f"{path}: no requests in the file")
    return requests


def cmd_submit(args: argparse.Namespace, out: Output) -> int:
    import shared.settlement.settler  # noqa: F401  registers the core's kinds
    from shared import apps, kinds

    if args.app is not None:
        from hookledger.cli.submit_app import cmd_submit_app

        return cmd_submit_app(args, out)
    if args.input is not None or args.id is not None:
        raise CliError("--input and --id go with --app, not --kind", code=2)
    kind = args.kind
    if not _KIND.fullmatch(kind):
        raise CliError(f"--kind must match {_KIND.pattern}, got {kind!r}", code=2)
    apps.load()  # the kinds the deployment's apps register are theirs, not this command's
    if kinds.built_in(kind):
        raise CliError(f"kind {kind!r} is a built-in pipeline's; it submits its own", code=2)
    requests = read_requests(args)
    # A generic kind has no settings of its own: the review's model setting, or Flash.
    model = args.model or os.environ.get("REVIEW_MODEL") or DEFAULT_MODEL
    # The tag lets reconcile recognise the batch as ours if registering below never happens.
    tag = kinds.generic(kind).make_tag(uuid.uuid4().hex[:12])
    name = runtime.gemini().create_batch(model, requests, display_name=tag)
    context = {
        "display_name": tag,
        "model": model,
        "keys": [key for key, _ in requests],
        "submitted_by": "cli",
    }
    try:
        record = runtime.ledger().operations.register(name, kind, context)
    except Exception as exc:
        raise CliError(f"batch {name} was created but registering it failed: {exc}") from exc
    out.emit(record.to_dict(), lambda: record.name)
    return 0


# --------------------------------------------------------------------------- ops list / show


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """The `ops list` fields of one stored operation."""
    keys = (
        "name",
        "kind",
        "status",
        "settled_by",
        "submitted_at",
        "settled_at",
        "attempts",
        "next_check_at",
        "writeback_done",
    )
    return {**{key: data.get(key) for key in keys}, "app": app_of(data.get("kind"))}


def app_of(kind: Any) -> str | None:
    """The app whose kind this is (None: a kind no loaded app registered, e.g. `submit --kind`)."""
    import shared.settlement.settler  # noqa: F401  registers the core's kinds
    from shared import apps, kinds

    apps.load()  # HOOKLEDGER_APPS: the same apps the functions load
    try:
        return (kinds.get(kind).app or None) if isinstance(kind, str) and kind else None
    except ValueError:  # a stored kind no app could have registered
        return None


def cmd_list(args: argparse.Namespace, out: Output) -> int:
    """Newest submitted first (the ledger's listing, served by a declared index)."""
    records = runtime.ledger().queries.list_operations(args.status, args.kind, limit=args.limit)
    rows = [summary(record.to_dict()) for record in records]
    out.emit(rows, lambda: table(rows, LIST_COLUMNS) if rows else "no operations")
    return 0


def stored_operation(name: str) -> dict[str, Any]:
    """Every stored field of the operation `name` (full name or bare id); CliError if none."""
    ledger = runtime.ledger()
    record = ledger.operations.get(name)
    if record is None:
        raise CliError(f"operation {name} not found")
    # The record's fields, plus any the record type does not model (as stored).
    stored = ledger.queries.stored_fields(record.name) or {}
    return {**record.to_dict(), **stored, "doc_id": record.doc_id, "app": app_of(record.kind)}


def cmd_show(args: argparse.Namespace, out: Output) -> int:
    data = stored_operation(args.name)
    out.emit(data, lambda: fields_block(data))
    return 0
