"""The GitHub delivery sweep's cost per run against the deliveries GitHub made since the last.

    python -m bench.sweep [--sizes 0,100,10000] [--failed-share 0.05] [--full-pages 10] [--quick]

Starts its own Firestore emulator, the simulator (GitHub's sending side and its App
webhook deliveries) and two loopback receivers standing for the ingress, one accepting
and one refusing with 503, on free ports, and stops them. For each size N, on an empty
database and delivery log: a first sweep run sets the checkpoint, GitHub (the simulator)
sends N pushes, `failed_share` of them (the oldest) answered 503 (failed: each becomes a
recovery), and one measured `DeliverySweep.run()` lists them and opens their
recoveries. Counted in this process (bench/_counting.py): GitHub calls (`/app/hook/`
requests), Firestore reads and writes as Firestore bills them; and per new delivery.
The recoveries are inside their grace during the run (as right after an outage), so no
redelivery is asked; each later step is one GitHub call and about one read and one write
per recovery.

A run lists every delivery for `--full-pages` pages (`GITHUB_SWEEP_FULL_PAGES`), then
only the failed ones (`status=failure`); `listing_every_delivery_calls` is what listing
them all would have cost. `--quick`: sizes 0, 10, 250 with one full page. Progress to
stderr, one JSON object to stdout; exit 1 if a measured run missed a failed delivery or
cost more calls than its full pages and one per 100 failed, or 2 + 2 reads per failed
delivery (the checkpoint, the open-recoveries query, each open recovery and its ledger
check).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from bench._counting import OperationCounter
from local.firestore_emulator import reset, start_firestore
from local.loopback import QuietHandler, serve
from local.processes import start_on_free_ports
from local.simulator.client import SimulatorClient, start_simulator

PROJECT = "demo-hookledger"
SENDERS = 8


def progress(message: str) -> None:
    print(f"[bench.sweep] {message}", file=sys.stderr, flush=True)


class Accepting(QuietHandler):
    """The ingress, standing: every delivery answered 202 at once."""

    STATUS = 202

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(self.STATUS)
        self.send_header("content-length", "0")
        self.end_headers()


class Refusing(Accepting):
    """The ingress refusing (Cloud Tasks unreachable): 503, in GitHub's `status=failure`."""

    STATUS = 503


def send(sim: SimulatorClient, count: int, failed: int, ok_url: str, dead_url: str) -> None:
    """GitHub sends `count` pushes, the first `failed` of them answered 503."""

    def one(n: int) -> None:
        payload = {"ref": "refs/heads/main", "after": f"{n:040x}", "commits": []}
        url = dead_url if n < failed else ok_url
        sim.send_github_webhook("push", payload, url=url, guid=f"bench-{n}")

    with ThreadPoolExecutor(max_workers=SENDERS) as pool:
        list(pool.map(one, range(count)))


def measure(size: int, share: float, full_pages: int, env: dict[str, Any]) -> dict[str, Any]:
    from shared.ledger import Ledger
    from shared.recovery import DeliverySweep, SweepSettings

    counter: OperationCounter = env["counter"]
    sim: SimulatorClient = env["sim"]
    with counter.uncounted():
        reset(env["firestore_host"], PROJECT)
        sim.reset()  # forgets the App too: registered anew
        ledger = Ledger(env["firestore"], clock=lambda: datetime.now(UTC))
        handed: list[Any] = []
        settings = SweepSettings(full_pages=full_pages)
        sweep = DeliverySweep(
            ledger, _github(sim), handed.append, lambda: datetime.now(UTC), settings
        )
        sweep.run()  # the checkpoint a steady deployment has
        failed = math.ceil(size * share)
        started = time.monotonic()
        send(sim, size, failed, env["ok_url"], env["dead_url"])
        progress(f"{size} deliveries sent ({failed} failed) in {time.monotonic() - started:.1f} s")
    before = counter.snapshot()
    report = sweep.run()
    used = counter.snapshot() - before
    reads, writes, calls = used["firestore_reads"], used["firestore_writes"], used["github_calls"]
    every = max(1, math.ceil(size / 100))  # one call per 100 listed, and one for none
    most = every if every <= full_pages else full_pages + max(1, math.ceil(failed / 100))
    return {
        "new_deliveries": size,
        "failed": failed,
        "listed": report.listed,
        "opened": report.opened,
        "pages": report.pages,
        "github_calls": calls,
        "listing_every_delivery_calls": every,
        "failed_only": report.failed_only,
        "firestore_reads": reads,
        "firestore_writes": writes,
        "github_calls_per_new": round(calls / size, 4) if size else None,
        "firestore_reads_per_new": round(reads / size, 4) if size else None,
        "elapsed_s": report.elapsed_s,
        # The checkpoint and the open-recoveries query (1 read when empty), each open
        # recovery and its ledger check; the full pages, then one call per 100 failed.
        "ok": report.opened == failed and reads <= 2 + 2 * failed and calls <= most,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__)
    parser.add_argument("--sizes", default="0,100,10000")
    parser.add_argument("--failed-share", type=float, default=0.05)
    parser.add_argument("--full-pages", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    sizes = [0, 10, 250] if args.quick else [int(s) for s in args.sizes.split(",")]
    from shared.recovery import SweepSettings

    full_pages = args.full_pages
    if full_pages is None:
        full_pages = 1 if args.quick else SweepSettings().full_pages
    from shared import apps

    apps.load(("apps.review",))  # it takes `push`: a failed push is one to recover
    counter = OperationCounter()
    counter.install()
    # Each on ports found free as it starts, again on others if one was taken meanwhile.
    firestore_service, (fs_port,) = start_on_free_ports(start_firestore)
    try:  # whatever fails to start, what did start is stopped
        simulator, (sim_port,) = start_on_free_ports(
            lambda port: start_simulator(port, github_webhook_url="http://127.0.0.1:9/github")
        )
    except BaseException:
        firestore_service.stop()
        raise
    try:
        with (
            serve(Accepting, name="bench-ingress") as ingress,
            serve(Refusing, name="bench-ingress-refusing") as refusing,
        ):
            env = _environment(counter, fs_port, sim_port, ingress.url)
            env["dead_url"] = f"{refusing.url}/github"
            rows = [measure(size, args.failed_share, full_pages, env) for size in sizes]
    finally:
        simulator.stop()
        firestore_service.stop()
    result = {"bench": "sweep", "full_pages": full_pages, "runs": rows}
    print(json.dumps(result, indent=2))
    return 0 if all(row["ok"] for row in rows) else 1


def _environment(
    counter: OperationCounter, fs_port: int, sim_port: int, ingress_url: str
) -> dict[str, Any]:
    """What every measurement uses: the clients, the emulator's host, the ingress's URL."""
    import os

    from google.cloud import firestore

    host = f"127.0.0.1:{fs_port}"
    os.environ["FIRESTORE_EMULATOR_HOST"] = host
    return {
        "counter": counter,
        "sim": SimulatorClient(f"http://127.0.0.1:{sim_port}"),
        "firestore_host": host,
        "firestore": firestore.Client(project=PROJECT),
        "ok_url": f"{ingress_url}/github",
    }


def _github(sim: SimulatorClient) -> Any:
    """A registered App's delivery client (the simulator's reset forgot the last one)."""
    from shared.github.app import AppCredentials
    from shared.github.hook_deliveries import HookDeliveriesClient

    app = sim.register_github_app()
    credentials = AppCredentials.from_pem(app["client_id"], app["private_key"])
    return HookDeliveriesClient(sim.url, credentials, timeout_s=30.0)


if __name__ == "__main__":
    sys.exit(main())
