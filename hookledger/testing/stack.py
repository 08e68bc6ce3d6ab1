"""`Stack`: what a test drives through the `hookledger` fixture (docs/apps.md, "Testing an app").

One stack per test session (hookledger/testing/launch.py starts it). The emulators run
for the whole session; the simulator and the functions run the apps the test is marked
with (`use`), started again when a test names other apps, so each app is tested with
exactly the apps its test names. Before each test, `reset()` empties both Firestore
databases, the simulator (faults included; the App is registered again with the same key
and ids), the crash plan, and the Cloud Tasks queue, deleted and created again. That last
step is what lets two tests send the same recorded payload: the ingress names a GitHub
task after its body and Cloud Tasks keeps a task's name taken for about an hour after it
ran, so the second test would be answered `duplicate`. The local emulator forgets a
deleted queue's tasks and tombstones (Cloud Tasks itself would refuse the name for days),
so each test starts with a fresh queue under the same name, while within a test a re-sent
body is still a `duplicate`, as deployed.

The functions act as one GitHub App, installed on every repository of the accounts of
`INSTALLATIONS` (hookledger/testing/accounts.py) with those ids in every test:
`hookledger` (5001), `octo-org` (5002) and `Codertocat` (1, the account and installation of
GitHub's example payloads).

App settings per test: the functions run with the apps' declared settings as `os.environ`
holds them when the test's `hookledger` fixture is set up (set them with `monkeypatch.setenv`
in a fixture the test lists before `hookledger`), or as the test sets them with
`use_settings(NAME=value)`; the simulator and the functions start again when those differ
from what runs, and again for the next test that wants others. A setting changed in
`os.environ` after the fixture reaches no function: the next `send_*`, `reconcile` or
`cli` call raises, naming it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookledger.testing.delivering import Delivering, Payload
from hookledger.testing.running import QUIET_S, TIMEOUT_S
from hookledger.testing.simulated import Simulated
from local.crash_plan import check_point, disarm, read_plan, write_plan

__all__ = ["QUIET_S", "TIMEOUT_S", "Crashes", "Payload", "Stack"]


@dataclass(frozen=True)
class Crashes:
    """What a `crash_at` plan did: `crashed` lists `{"pid", "point"}` per death, also
    after the `with` block (until the next test)."""

    plan_path: Path

    @property
    def crashed(self) -> list[dict[str, Any]]:
        return list(read_plan(self.plan_path).get("crashed", []))


class Stack(Delivering, Simulated):
    """The session's running pipeline; see the module docstring and docs/apps.md.

    Its methods live by group: the session in hookledger/testing/running.py, sending and
    waiting in delivering.py, what is stored in stored.py, the simulator in simulated.py.
    """

    # --- faults --------------------------------------------------------------------------

    @contextlib.contextmanager
    def crash_at(self, point: str, times: int = 1) -> Iterator[Crashes]:
        """The functions' processes die for real (os._exit) the first `times` times any of
        them reaches crash point `point` (shared/crashpoints.py); KeyError for a name that
        is not one. gunicorn starts a new worker process; Cloud Tasks retries the request."""
        write_plan(self._plan, check_point(point), times)
        try:
            yield Crashes(self._plan)
        finally:
            disarm(self._plan)

    # --- the command line ----------------------------------------------------------------

    def cli(self, *args: str, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `hookledger ARGS…` against the stack (its environment); never raises on a
        non-zero exit: look at `returncode`, `stdout`, `stderr`."""
        self._check_settings()
        code = "import sys; from hookledger.cli import main; sys.exit(main())"
        return subprocess.run(  # noqa: S603 (this interpreter running the CLI)
            [sys.executable, "-c", code, *args],
            env={**os.environ, **self.env},
            input=input_text,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
