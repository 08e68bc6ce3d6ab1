"""Cold start of the worker and reconcile entry points against the least they must import.

    python -m bench.cold [--repeats 7] [--quick] [--no-tracing]

For each function, in fresh interpreters (bench/_cold.py): the import of
functions-framework + google-cloud-firestore + google-genai (what the function cannot do
without) against that plus loading functions/main.py with functions-framework's loader, and
the time to build the function's endpoint (its first request). The ingress's figure is in
bench.ack ("cold_start"); here, `ingress_apps`: its import with the review alone and with
the three apps loaded as at start (shared.apps.load), against the same minimum. Then
`tracing`, for each of the three functions: its import as the served function
(FUNCTION_TARGET set: the startup check runs `tracing.configure`) with TRACING=off and
TRACING=file, and the difference in ms (bench/_cold.py). Then `kept_out`: for each module
shared/lazy_imports.py keeps out of a cold start, its import after the served ingress, beside
the figure the list states. One JSON object to stdout; goals
are reported, not asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from bench._cold import (
    IMPORT_GOAL,
    THREE_APPS,
    apps_cold_start,
    cold_start,
    kept_out_cost,
    tracing_cold_start,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cold", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="1 repeat (the test)")
    parser.add_argument("--no-tracing", action="store_true", help="skip the tracing off/on part")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be positive")
    result: dict[str, object] = {}
    apps: dict[str, object] = {}
    for loaded in ("apps.review", THREE_APPS):
        print(f"[bench.cold] ingress with {loaded}: {repeats} fresh interpreters", file=sys.stderr)
        apps[loaded] = apps_cold_start(repeats, loaded)
    result["ingress_apps"] = apps
    for function in ("worker", "reconcile"):
        print(f"[bench.cold] {function}: {repeats} fresh interpreters each", file=sys.stderr)
        result[function] = cold_start(function, repeats)
    print(
        f"[bench.cold] kept out (shared/lazy_imports.py): {repeats} fresh interpreters a module",
        file=sys.stderr,
    )
    result["kept_out"] = kept_out_cost(repeats)
    if not args.no_tracing:
        traced = {}
        with tempfile.TemporaryDirectory(prefix="bench-cold-traces-") as trace_dir:
            for function in ("ingress", "worker", "reconcile"):
                print(
                    f"[bench.cold] {function}, tracing off and on: {repeats} fresh "
                    "interpreters each",
                    file=sys.stderr,
                )
                traced[function] = tracing_cold_start(function, repeats, trace_dir)
                print(f"[bench.cold] {function}: {json.dumps(traced[function])}", file=sys.stderr)
        result["tracing"] = traced
    print(json.dumps({"benchmark": "cold", "goal": IMPORT_GOAL, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
