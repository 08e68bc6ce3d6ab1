"""`python -m local.cloudtasks_emulator`: run until SIGTERM or SIGINT, then exit 0."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from local.cloudtasks_emulator.clock import ManualClock
from local.cloudtasks_emulator.emulator import Emulator
from local.cloudtasks_emulator.journal import JournalError
from local.cloudtasks_emulator.model import ApiError


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m local.cloudtasks_emulator", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123, help="gRPC port (default 8123)")
    parser.add_argument(
        "--http-port", type=int, default=8124, help="port serving /jwks.json (default 8124)"
    )
    parser.add_argument(
        "--tombstone-s",
        type=float,
        default=3600.0,
        help="seconds a task name stays taken after the task ran or was deleted",
    )
    parser.add_argument(
        "--time-scale",
        type=_positive,
        default=1.0,
        help="multiplies backoff, dispatch deadline and rate waits (1.0 = faithful)",
    )
    parser.add_argument(
        "--manual-clock",
        action="store_true",
        help="freeze the emulator's clock at start; it moves only on POST /_clock/advance "
        '(body {"seconds": S}) on the --http-port server (tests)',
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep queues, tasks, tombstones and the OIDC signing key in DIR, so they "
        "survive a restart like the real, durable queue (default: memory only, and a new "
        "signing key at every start)",
    )
    parser.add_argument(
        "--rotate-signing-key",
        action="store_true",
        help="make a new OIDC signing key at start even if --data-dir holds one, publish "
        "only it and store it there: a key rotation that keeps the queued tasks",
    )
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="projects/P/locations/L/queues/Q",
        help="create this queue at start (repeatable)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        emulator = Emulator(
            args.host,
            args.port,
            args.http_port,
            tombstone_s=args.tombstone_s,
            time_scale=args.time_scale,
            queues=args.queue,
            clock=ManualClock() if args.manual_clock else None,
            data_dir=args.data_dir,
            rotate_signing_key=args.rotate_signing_key,
        )
    except JournalError as exc:
        print(f"cloudtasks emulator: --data-dir: {exc}", file=sys.stderr, flush=True)
        return 2
    except ApiError as exc:
        print(f"cloudtasks emulator: bad --queue: {exc.message}", file=sys.stderr, flush=True)
        return 2
    except OSError as exc:
        print(f"cloudtasks emulator: cannot start: {exc}", file=sys.stderr, flush=True)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    emulator.start()
    print(f"jwks {emulator.jwks_url}", flush=True)
    print(
        f"cloudtasks emulator listening on {args.host}:{args.port} "
        f"(time scale {args.time_scale}, tombstone {args.tombstone_s:g}s"
        f"{', manual clock' if args.manual_clock else ''}"
        f"{f', data dir {args.data_dir}' if args.data_dir else ''}"
        f"{', signing key rotated' if args.rotate_signing_key else ''})",
        flush=True,
    )
    while not stop.wait(0.5):
        pass
    emulator.stop()
    print("cloudtasks emulator stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
