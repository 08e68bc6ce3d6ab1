"""`python -m local.chaos`: run the scenarios, print progress, one table; non-zero on a failure."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from local.chaos.report import table
from local.chaos.runner import Chaos, Row
from local.chaos.scenarios import FULL_SIZES, REDUCED_SIZES, SCENARIOS
from local.chaos.sharing import for_size
from local.chaos.stack import ChaosStack
from local.processes import ServiceError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.chaos", description=__doc__)
    parser.add_argument("--size", choices=("full", "reduced"), default="full")
    parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="repeatable; default all"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    args = parser.parse_args(argv)
    sizes = FULL_SIZES if args.size == "full" else REDUCED_SIZES
    names = args.scenario or list(SCENARIOS)

    def progress(text: str) -> None:
        print(text, file=sys.stderr if args.json else sys.stdout, flush=True)

    try:
        rows = run(names, sizes, progress)
    except ServiceError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        print(table(rows))
    return 1 if any(row.passed is False for row in rows) else 0


def run(
    names: list[str], sizes: dict[str, int], progress: Callable[[str], None] = print
) -> list[Row]:
    """Start one stack, run `names` in order at `sizes`, stop the stack; the rows."""
    with ChaosStack.started(sharing=for_size(sizes[names[0]])) as stack:
        chaos = Chaos(stack, progress=progress)
        for name in names:
            SCENARIOS[name](chaos, sizes[name])
        return chaos.rows


if __name__ == "__main__":
    sys.exit(main())
