"""Start the emulator as a child process (tests, benchmarks, `make run`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from local.processes import Service, printed, start

REPO = Path(__file__).resolve().parents[2]


def start_cloudtasks(
    port: int,
    http_port: int,
    *,
    time_scale: float = 1.0,
    tombstone_s: float = 3600.0,
    manual_clock: bool = False,
    data_dir: str | Path | None = None,
    rotate_signing_key: bool = False,
    queues: Sequence[str] = (),
    echo: Callable[[str, str], None] | None = None,
    timeout: float = 60.0,
) -> Service:
    """`python -m local.cloudtasks_emulator` on 127.0.0.1, ready once it printed `listening`.

    Its JWKS is then at `http://127.0.0.1:{http_port}/jwks.json`. With `manual_clock` its
    clock stands still until `POST http://127.0.0.1:{http_port}/_clock/advance`. With
    `data_dir` its queues, tasks, tombstones and signing key survive a restart on that
    directory (one running emulator per directory). `rotate_signing_key` makes and
    stores a new signing key even if `data_dir` holds one (the queued tasks stay).
    `queues` (full queue paths) are created at start, as `--queue` does.
    """
    return start(
        "cloudtasks",
        [
            sys.executable,
            "-m",
            "local.cloudtasks_emulator",
            "--host=127.0.0.1",
            f"--port={port}",
            f"--http-port={http_port}",
            f"--time-scale={time_scale}",
            f"--tombstone-s={tombstone_s}",
            *(["--manual-clock"] if manual_clock else []),
            *([f"--data-dir={data_dir}"] if data_dir is not None else []),
            *(["--rotate-signing-key"] if rotate_signing_key else []),
            *(f"--queue={queue}" for queue in queues),
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=REPO,
        ready=printed("listening"),
        timeout=timeout,
        echo=echo,
    )
