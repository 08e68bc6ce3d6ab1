"""Serve a function from `functions/main.py` under functions-framework, as a child process."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from local.processes import Service, listening_on, start

REPO = Path(__file__).resolve().parents[1]
MAIN = REPO / "functions" / "main.py"


def start_function(
    target: str,
    port: int,
    env: Mapping[str, str],
    *,
    source: Path = MAIN,
    name: str | None = None,
    echo: Callable[[str, str], None] | None = None,
    timeout: float = 60.0,
) -> Service:
    """`functions-framework --target=TARGET` on 127.0.0.1:`port`; ready once it accepts."""
    return start(
        name or target,
        [
            sys.executable,
            "-m",
            "functions_framework",
            f"--target={target}",
            f"--source={source}",
            "--host=127.0.0.1",
            f"--port={port}",
        ],
        env=env,
        cwd=REPO,
        ready=listening_on(port),
        timeout=timeout,
        echo=echo,
    )
