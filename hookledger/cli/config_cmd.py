"""`config`: every setting of the loaded apps (`HOOKLEDGER_APPS`), as each app declared it.

One row per setting: its app, name, type, default, the value the environment gives it now
(a secret shows only whether it is set) and its help. A value the app would refuse is
shown with the problem, so a bad deployment is found before it fails to start.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from hookledger.cli.output import CliError, Output, table
from shared import apps
from shared.errors import ConfigError

COLUMNS = [
    ("APP", "app"),
    ("NAME", "name"),
    ("TYPE", "type"),
    ("VALUE", "shown"),
    ("DEFAULT", "default"),
    ("HELP", "help"),
]


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("config", parents=[common], help="the loaded apps' settings")
    parser.set_defaults(func=cmd_config)


def rows(environ: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The settings of every app `HOOKLEDGER_APPS` names, in declaration order."""
    env = dict(os.environ if environ is None else environ)
    try:
        loaded = apps.load(apps.names_from_env(env))
    except apps.AppError as exc:
        raise CliError(str(exc)) from None
    found = []
    for record in loaded:
        for setting in record.settings:
            raw = env.get(setting.name)
            row: dict[str, Any] = {
                "app": record.name,
                "name": setting.name,
                "type": setting.type,
                "default": _plain(setting.default),
                "set": raw is not None,
                "help": setting.help,
            }
            try:
                value = setting.parse(raw)
            except ConfigError as exc:
                row["problem"] = str(exc)
                value = None
            if setting.secret:
                row["shown"] = "<set>" if raw else "<unset>"
            else:
                row["value"] = _plain(value)
                row["shown"] = row.get("problem") or _text(value)
            found.append(row)
    return found


def cmd_config(args: argparse.Namespace, out: Output) -> int:
    found = rows()
    out.emit(found, lambda: table(found, COLUMNS) if found else "no app settings")
    return 1 if any("problem" in row for row in found) else 0


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _text(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
