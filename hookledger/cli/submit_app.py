"""`hookledger submit --app NAME --input FILE [--id ID]`: an app's items submitted from a file.

The app (`apps.NAME`) must offer `validate_items(items)` and `submit_items(ctx, items, *,
submission_id)` (apps/classify does). FILE holds JSON lines, one item each (for classify
`{"id": …, "text": …}`); a bad line is named and nothing is submitted. The submission
runs through the app's exactly-once submitter, with the worker's context for the app:
a second run with the same `--id` submits nothing new ("already submitted as …").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from hookledger.cli.output import CliError, Output

_APP = re.compile(r"[a-z][a-z0-9_]{0,39}")


def read_items(path: Path) -> tuple[list[Any], list[int]]:
    """The items of a JSON-lines file and the line number of each (blank lines skipped);
    CliError naming the line when one is not a JSON object."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from exc
    items: list[Any] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        except ValueError as exc:  # e.g. a number too long to convert
            raise CliError(f"{path}:{number}: not valid JSON ({exc})") from None
        if not isinstance(item, dict):
            raise CliError(f"{path}:{number}: not a JSON object")
        items.append(item)
        numbers.append(number)
    if not items:
        raise CliError(f"{path}: no items in the file")
    return items, numbers


def load_app(name: str) -> Any:
    """The app module `apps.{name}`, loaded as a deployment loads it."""
    import importlib

    from shared import apps

    if not _APP.fullmatch(name):
        raise CliError(f"--app must match {_APP.pattern}, got {name!r}", code=2)
    module_name = f"apps.{name}"
    try:
        apps.load([module_name])
    except apps.AppError as exc:
        raise CliError(f"--app {name}: {exc}", code=2) from exc
    module = importlib.import_module(module_name)
    if not callable(getattr(module, "submit_items", None)):
        raise CliError(f"app {name!r} takes no submissions from the CLI", code=2)
    if module_name not in apps.names_from_env():
        # Settlement and reconcile use the app's kind only where the deployment loads it.
        print(
            f"hookledger: warning: {module_name} is not in HOOKLEDGER_APPS: the functions "
            "would settle its batch without its write-back",
            file=sys.stderr,
        )
    return module


def cmd_submit_app(args: argparse.Namespace, out: Output) -> int:
    from shared.entrypoints import runtime
    from shared.errors import ConfigError, HookledgerError, TransientError

    if args.input is None:
        raise CliError("--app needs --input FILE (JSON lines, one item each)", code=2)
    if args.prompt or args.file is not None or args.model:
        raise CliError("--prompt, --file and --model go with --kind, not --app", code=2)
    module = load_app(args.app)
    items, numbers = read_items(args.input)
    submission_id = args.id or uuid.uuid4().hex[:12]
    validate = getattr(module, "validate_items", None)
    if callable(validate):
        _validated(validate, items, numbers, args.input)
    ctx = runtime.handler_context().for_app(module.app.name)
    try:
        result = module.submit_items(ctx, items, submission_id=submission_id)
    except HookledgerError as exc:
        if isinstance(exc, ConfigError):
            raise  # named by the CLI as a configuration problem
        retry = " (try again shortly)" if isinstance(exc, TransientError) else ""
        raise CliError(f"submission {submission_id}: {exc}{retry}") from exc
    data = {
        "operation": result.operation,
        "submission": result.submission,
        "items": result.items,
        "created": result.created,
    }
    if not result.created:
        data["detail"] = result.detail

    def human() -> str:
        if result.created:
            return str(result.operation)
        return f"submission {result.submission}: {result.detail}"

    out.emit(data, human)
    return 0


def _validated(validate: Any, items: list[Any], numbers: list[int], path: Path) -> None:
    """Run the app's check; an item's error names its line of `path`."""
    from shared.errors import HookledgerError

    try:
        validate(items)
    except HookledgerError as exc:
        index = getattr(exc, "index", None)
        detail = getattr(exc, "detail", None) or str(exc)
        if isinstance(index, int) and 0 <= index < len(numbers):
            raise CliError(f"{path}:{numbers[index]}: {detail}") from None
        raise CliError(f"{path}: {exc}") from None
