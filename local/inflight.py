"""Which requests a function process is serving now, seen from another process (local only).

The test kit (hookledger/testing) empties its stack between tests; a previous test's
request still running in the worker would write into the next test. Each function served
from local/crashing_main.py marks a request it serves with an empty file
`{pid}-{random}` in the directory `INFLIGHT_VARIABLE` names, removed when it answers. A
file whose process is gone (it died at a crash point, or was killed) does not count.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

INFLIGHT_VARIABLE = "HOOKLEDGER_INFLIGHT_DIR"


def tracked(serve: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`serve`, marking each request in the directory while it runs (when one is named)."""

    @functools.wraps(serve)
    def serving(request: Any) -> Any:
        directory = os.environ.get(INFLIGHT_VARIABLE)
        if not directory:
            return serve(request)
        marker = Path(directory) / f"{os.getpid()}-{uuid.uuid4().hex}"
        marker.touch()
        try:
            return serve(request)
        finally:
            marker.unlink(missing_ok=True)

    return serving


def busy(directory: Path) -> list[str]:
    """The requests being served now (their marker names); markers of dead processes are
    removed."""
    live = []
    for marker in directory.glob("*-*"):
        pid = marker.name.split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            live.append(marker.name)
        else:
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()
    return sorted(live)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
