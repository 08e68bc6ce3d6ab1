"""Which limit binds first at 10, 100 and 1,000 pushes/s, and at a 10x burst for a minute.

    python -m bench.capacity [--cost-json F] [--ack-json F] [--e2e-json F] [--events 3]
                             [--e2e-pushes 100]
    python -m bench.capacity --inputs docs/capacity-inputs.json [--markdown]
    python -m bench.capacity --save-inputs docs/capacity-inputs.json     # measure, record

Combines (bench/_capacity.py):
- what the benches measure per event: Firestore reads, writes and commits, CreateTask,
  Gemini and GitHub calls per accepted push and per settlement by webhook (bench/cost.py,
  run here with `--events` unless `--cost-json` gives a previous run's stdout), and CPU
  seconds per request (the worker's from bench/e2e.py's `cpu_s_by_process`, run here with
  `--e2e-pushes` pushes unless `--e2e-json` is given; the ingress's from bench/ack.py's `cpu` when
  `--ack-json` is given, else from the same e2e run);
- the documented limits, prices and the planning latencies no bench here can measure,
  each with its source (bench/_limits.py; `--assume key=value` overrides an assumption);
- this deployment's Terraform defaults (terraform/variables.tf).

For each tier it prints the limit that binds first and what moves it, the first of our own
Terraform settings to bind, instances per function, the queue's backlog and the cost per
hour (US regional). `--inputs` reads the measured figures recorded by `--save-inputs`,
so the "Scale" tables of docs/performance.md (`--markdown`) can be re-made without re-measuring.
Progress goes to stderr; one JSON object (or, with `--markdown`, the tables) to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._capacity import Deployment, Measured, model, render_markdown
from bench._limits import ASSUMED

REPO = Path(__file__).resolve().parents[1]


def progress(message: str) -> None:
    print(f"[bench.capacity] {message}", file=sys.stderr, flush=True)


# The benches count one batch per push; the model derives shared batches from it
# (bench/_capacity.py). bench.cost completes each push's batch by the push's operation.
ONE_BATCH_PER_PUSH = {"REVIEW_GROUP_REQUESTS": "0"}


def run_bench(name: str, *args: str) -> dict[str, Any]:
    """`python -m bench.NAME ARGS` in its own process, one batch per push; its stdout is
    one JSON object."""
    progress(f"running python -m bench.{name} {' '.join(args)}")
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", *args],
        cwd=REPO,
        env=os.environ | ONE_BATCH_PER_PUSH,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.{name} exited {done.returncode}")
    return dict(json.loads(done.stdout))


def load(path: str) -> dict[str, Any]:
    return dict(json.loads(Path(path).read_text()))


def cpu_from_e2e(e2e: dict[str, Any], requests_per_push: float) -> dict[str, float]:
    """CPU seconds per request of the ingress and the worker in e2e's webhook round."""
    round_ = e2e["webhook"]
    requests = round_["pushes"] * requests_per_push
    cpu = round_["cpu_s_by_process"]
    return {name: cpu[name] / requests for name in ("ingress", "worker")}


def measure(args: argparse.Namespace) -> Measured:
    if args.cost_json:
        cost = load(args.cost_json)
        cost_from = f"python -m bench.cost --events {cost.get('events_per_figure')} (saved)"
    else:
        cost = run_bench("cost", "--events", str(args.events))
        cost_from = f"REVIEW_GROUP_REQUESTS=0 python -m bench.cost --events {args.events}"
    tasks = sum(
        float(cost[event].get("tasks_create_task", 0))
        for event in ("accepted_push", "settled_by_webhook")
    )
    if args.e2e_json:
        e2e = load(args.e2e_json)
        e2e_from = f"python -m bench.e2e --pushes {e2e['webhook']['pushes']} (saved)"
    else:
        e2e = run_bench("e2e", "--pushes", str(args.e2e_pushes), "--rounds", "webhook")
        e2e_from = f"python -m bench.e2e --pushes {args.e2e_pushes} --rounds webhook"
    cpu = cpu_from_e2e(e2e, tasks)
    ingress_from = f"{e2e_from} (webhook round, cpu_s_by_process)"
    if args.ack_json:
        ack = load(args.ack_json)
        cpu["ingress"] = float(ack["cpu"]["ingress_server_s_per_1000"]) / 1000
        ingress_from = "python -m bench.ack (saved; cpu.ingress_server_s_per_1000)"
    return Measured.from_benches(
        cost,
        ingress_cpu_s=round(cpu["ingress"], 5),
        worker_cpu_s=round(cpu["worker"], 5),
        sources={
            "operations": cost_from,
            "ingress_cpu_s": ingress_from,
            "worker_cpu_s": f"{e2e_from} (webhook round, cpu_s_by_process)",
            "measured_on": time.strftime("%Y-%m-%d"),
        },
    )


def assumption(text: str) -> tuple[str, float]:
    key, _, value = text.partition("=")
    if key not in ASSUMED or not value:
        raise argparse.ArgumentTypeError(f"--assume KEY=VALUE, KEY one of {sorted(ASSUMED)}")
    return key, float(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.capacity",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cost-json", help="stdout of a previous `python -m bench.cost`")
    parser.add_argument("--e2e-json", help="stdout of a previous `python -m bench.e2e`")
    parser.add_argument("--ack-json", help="stdout of a previous `python -m bench.ack`")
    parser.add_argument("--events", type=int, default=3, help="bench.cost's --events")
    parser.add_argument(
        "--e2e-pushes",
        type=int,
        default=100,
        help="bench.e2e's --pushes (its first requests warm the worker up: 6 overstate CPU)",
    )
    parser.add_argument("--inputs", help="measured inputs recorded by --save-inputs")
    parser.add_argument("--save-inputs", help="record the measured inputs to this file")
    parser.add_argument("--assume", type=assumption, action="append", default=[])
    parser.add_argument("--markdown", action="store_true", help="Scale tables, not JSON")
    args = parser.parse_args(argv)
    measured = Measured.from_json(load(args.inputs)) if args.inputs else measure(args)
    if args.save_inputs:
        Path(args.save_inputs).write_text(json.dumps(measured.to_json(), indent=2) + "\n")
        progress(f"measured inputs recorded in {args.save_inputs}")
    result = model(measured, Deployment.from_terraform(), assume=dict(args.assume))
    if args.markdown:
        sys.stdout.write(render_markdown(result))
        return 0
    print(json.dumps({"benchmark": "capacity", "measured": measured.to_json(), **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
