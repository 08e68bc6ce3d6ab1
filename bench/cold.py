"""Cold start of the worker and reconcile entry points against the least they must import.

    python -m bench.cold [--repeats 7] [--quick]

For each function, in fresh interpreters (bench/_cold.py): the import of
functions-framework + google-cloud-firestore + google-genai (what the function cannot do
without) against that plus loading functions/main.py with functions-framework's loader, and
the time to build the function's endpoint (its first request). The ingress's figure is in
bench.ack ("cold_start"). One JSON object to stdout; goals are reported, not asserted.
"""

from __future__ import annotations

import argparse
import json
import sys

from bench._cold import IMPORT_GOAL, cold_start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cold", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="1 repeat (the test)")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be positive")
    result = {}
    for function in ("worker", "reconcile"):
        print(f"[bench.cold] {function}: {repeats} fresh interpreters each", file=sys.stderr)
        result[function] = cold_start(function, repeats)
    print(json.dumps({"benchmark": "cold", "goal": IMPORT_GOAL, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
