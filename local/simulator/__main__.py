"""`python -m local.simulator`: serve the simulator until SIGTERM/SIGINT.

Prints `simulator listening on http://HOST:PORT` once the socket is bound (with
`--port 0` the line names the port the OS chose).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from werkzeug.serving import make_server

from local.simulator.app import create_app
from local.simulator.engine import Settings, Simulator
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET
from shared.logs import configure


def default_secret() -> str:
    """The first of GEMINI_WEBHOOK_SECRETS (the one that signs), else the local secret."""
    first = os.environ.get("GEMINI_WEBHOOK_SECRETS", "").split(",")[0].strip()
    return first or LOCAL_GEMINI_SECRET


def default_github_secret() -> str:
    """The first of GITHUB_WEBHOOK_SECRETS (the one that signs), else the local secret."""
    first = os.environ.get("GITHUB_WEBHOOK_SECRETS", "").split(",")[0].strip()
    return first or LOCAL_GITHUB_SECRET


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m local.simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument(
        "--webhook-url",
        default=os.environ.get("SIM_WEBHOOK_URL", ""),
        help="where completion webhooks go (env SIM_WEBHOOK_URL), e.g. http://127.0.0.1:8080/gemini",
    )
    parser.add_argument(
        "--webhook-secret",
        default=None,
        help="whsec_ secret for --webhook-url deliveries (default: GEMINI_WEBHOOK_SECRETS' first)",
    )
    parser.add_argument(
        "--github-webhook-url",
        default=os.environ.get("SIM_GITHUB_WEBHOOK_URL", ""),
        help="where GitHub App webhooks (check_run rerequested, /_sim/github/webhooks) go "
        "(env SIM_GITHUB_WEBHOOK_URL), "
        "e.g. http://127.0.0.1:8080/github",
    )
    parser.add_argument(
        "--github-webhook-secret",
        default=None,
        help="secret signing GitHub webhooks (default: GITHUB_WEBHOOK_SECRETS' first)",
    )
    parser.add_argument(
        "--github-webhook-timeout-s",
        type=float,
        default=10.0,
        help="how long GitHub webhooks wait for an answer before `timed out` (GitHub: 10)",
    )
    parser.add_argument(
        "--auto-complete-s",
        type=float,
        default=None,
        help="batches succeed on their own this many seconds after creation, or after they "
        "start when /_sim/gemini/processing gives them slots (default: never)",
    )
    parser.add_argument("--webhook-retries", type=int, default=3)
    parser.add_argument("--webhook-backoff-s", type=float, default=0.2)
    parser.add_argument("--webhook-timeout-s", type=float, default=5.0)
    parser.add_argument(
        "--webhook-disable-after",
        type=int,
        default=3,
        help="failed deliveries in a row before a registered webhook is disabled (0: never)",
    )
    args = parser.parse_args(argv)
    if args.webhook_secret is None:
        args.webhook_secret = default_secret()
    if args.github_webhook_secret is None:
        args.github_webhook_secret = default_github_secret()
    if not args.webhook_secret.startswith("whsec_"):
        parser.error("--webhook-secret must be a Standard Webhooks secret starting with whsec_")
    if args.auto_complete_s is not None and args.auto_complete_s < 0:
        parser.error("--auto-complete-s must be >= 0")
    if args.github_webhook_timeout_s <= 0:
        parser.error("--github-webhook-timeout-s must be > 0")
    if args.webhook_retries < 0 or args.webhook_backoff_s < 0 or args.webhook_timeout_s <= 0:
        parser.error("--webhook-retries/--webhook-backoff-s must be >= 0, --webhook-timeout-s > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure("INFO")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    settings = Settings(
        webhook_url=args.webhook_url,
        webhook_secret=args.webhook_secret,
        auto_complete_s=args.auto_complete_s,
        webhook_retries=args.webhook_retries,
        webhook_backoff_s=args.webhook_backoff_s,
        webhook_timeout_s=args.webhook_timeout_s,
        webhook_disable_after=args.webhook_disable_after,
        github_webhook_url=args.github_webhook_url,
        github_webhook_secret=args.github_webhook_secret,
        github_webhook_timeout_s=args.github_webhook_timeout_s,
    )
    sim = Simulator(settings)
    try:
        server = make_server(args.host, args.port, create_app(sim), threaded=True)
    except OSError as exc:
        print(f"simulator: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1

    def stop(signum: int, _frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever() to return, so it must run off the main thread.
        threading.Thread(target=server.shutdown, name="shutdown", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sim.start_auto_complete()
    target = args.webhook_url or "(none; registered webhooks only)"
    print(
        f"simulator listening on http://{args.host}:{server.server_port} webhooks to {target}",
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        sim.stop(timeout=2.0)
    print("simulator stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
