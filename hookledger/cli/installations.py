"""`installations`: the GitHub App installations the worker recorded, read-only.

One page, by installation id (`--status` filters through a declared composite index).
REPOS is how many repositories a selected installation is recorded to cover (`+` when its
list may be partial: no `created` was recorded for it), or `all`.
"""

from __future__ import annotations

import argparse
from typing import Any

from hookledger.cli.ops import limit_arg
from hookledger.cli.output import Output, table
from shared.entrypoints import runtime
from shared.ledger import INSTALLATION_STATUSES, Installation

COLUMNS = [
    ("ID", "installation_id"),
    ("ACCOUNT", "account"),
    ("STATUS", "status"),
    ("SELECTION", "repository_selection"),
    ("REPOS", "repos"),
    ("UPDATED", "updated_at"),
    ("DELIVERY", "delivery_id"),
]


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "installations", parents=[common], help="GitHub App installations, by id"
    )
    parser.add_argument("--status", choices=INSTALLATION_STATUSES)
    parser.add_argument("--limit", type=limit_arg, default=50)
    parser.add_argument("--after", type=int, help="the last id of the previous page")
    parser.set_defaults(func=cmd_installations)


def shown(installation: Installation) -> dict[str, Any]:
    """What `--json` prints of one installation: no orders, the covered names and count."""
    selected = installation.repository_selection == "selected"
    count = len(installation.covered)
    return {
        "installation_id": installation.installation_id,
        "account": installation.account,
        "status": installation.status,
        "repository_selection": installation.repository_selection,
        "repositories": list(installation.covered) if selected else None,
        "repositories_count": count if selected else None,
        "repositories_complete": installation.repositories_complete,
        "repos": (
            f"{count}{'' if installation.repositories_complete else '+'}" if selected else "all"
        ),
        "updated_at": installation.updated_at,
        "delivery_id": installation.delivery_id,
    }


def cmd_installations(args: argparse.Namespace, out: Output) -> int:
    found = runtime.ledger().installations.listing(args.status, args.limit, args.after)
    rows = [shown(installation) for installation in found]
    out.emit(rows, lambda: table(rows, COLUMNS) if rows else "no installations")
    return 0
