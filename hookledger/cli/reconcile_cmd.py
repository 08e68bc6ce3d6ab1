"""`reconcile --once`: one reconcile run in this process, its report printed.

The progress bar is drawn on stderr when stderr is a terminal and more than a handful
of operations are checked, fed by `Reconciler.run(progress=...)`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hookledger.cli.output import CliError, Output, ProgressBar, fields_block
from shared.entrypoints import runtime


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("reconcile", parents=[common], help="run reconcile in this process")
    parser.add_argument(
        "--once", action="store_true", required=True, help="one run, then exit (the only mode)"
    )
    parser.set_defaults(func=cmd_reconcile)


def cmd_reconcile(args: argparse.Namespace, out: Output) -> int:
    reconciler = runtime.reconciler()
    bar = None
    if sys.stderr.isatty():
        bar = ProgressBar(sys.stderr)
    try:
        report = reconciler.run(progress=bar)
    finally:
        if bar is not None:
            bar.close()
    data = report.to_dict()
    out.emit(data, lambda: fields_block(data))
    if data.get("errors") and not data.get("examined") and not data.get("adopted"):
        raise CliError(
            f"reconcile could not check anything: {data['errors']} error(s); "
            "see the log lines above"
        )
    return 0
