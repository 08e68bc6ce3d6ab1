"""A crash plan shared by real processes: where the functions die, and how many times.

The test kit (hookledger/testing) writes the plan; every function process served from
local/crashing_main.py installs `hook` as its crash-point hook (shared/crashpoints.py). The
plan is one small JSON file named by `CRASH_PLAN_VARIABLE`::

    {"point": "push.after_create", "left": 1, "crashed": [{"pid": 4242, "point": "…"}]}

The first `left` times any process reaches `point`, it records its pid and `os._exit`s at
once: no `finally`, no answer, exactly as a killed process (gunicorn starts a new worker,
Cloud Tasks retries the request). An fcntl lock around each read-modify-write keeps the
count right across processes. No file, or `left` 0: the hook does nothing. Local only.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.crashpoints import POINTS

CRASH_PLAN_VARIABLE = "HOOKLEDGER_CRASH_PLAN"
# What a process that "died" at a crash point exits with (EX_SOFTWARE).
CRASH_EXIT_CODE = 70


def check_point(point: str) -> str:
    """`point` when it names a crash point; else a KeyError listing where to look."""
    if point not in POINTS:
        raise KeyError(
            f"no crash point named {point!r}; the names are in shared/crashpoints.py POINTS"
        )
    return point


@contextmanager
def _locked(path: Path) -> Iterator[Any]:
    with open(path, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read(handle: Any) -> dict[str, Any]:
    handle.seek(0)
    text = handle.read()
    return json.loads(text) if text.strip() else {}


def _write(handle: Any, plan: dict[str, Any]) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(plan))
    handle.flush()


def write_plan(path: Path, point: str | None, times: int = 1) -> None:
    """Crash at `point` the next `times` times (None: never); forgets earlier crashes."""
    if point is not None:
        check_point(point)
    if times < 0:
        raise ValueError(f"times must be 0 or more, got {times}")
    with _locked(path) as handle:
        _write(handle, {"point": point, "left": times if point else 0, "crashed": []})


def disarm(path: Path) -> None:
    """Crash nowhere from now on; the `crashed` record stays for the test to read."""
    with _locked(path) as handle:
        plan = _read(handle)
        _write(handle, {"point": None, "left": 0, "crashed": plan.get("crashed", [])})


def read_plan(path: Path) -> dict[str, Any]:
    """The plan as it stands: `point`, `left` and the `crashed` processes so far."""
    if not path.exists():
        return {"point": None, "left": 0, "crashed": []}
    with _locked(path) as handle:
        return _read(handle) or {"point": None, "left": 0, "crashed": []}


def hook(point: str) -> None:
    """The crash-point hook of a process under a plan: die here if the plan says so."""
    name = os.environ.get(CRASH_PLAN_VARIABLE)
    if not name:
        return
    path = Path(name)
    if not path.exists():
        return
    with _locked(path) as handle:
        plan = _read(handle)
        if plan.get("point") != point or int(plan.get("left", 0)) <= 0:
            return
        plan["left"] = int(plan["left"]) - 1
        plan.setdefault("crashed", []).append({"pid": os.getpid(), "point": point})
        _write(handle, plan)
    os._exit(CRASH_EXIT_CODE)
