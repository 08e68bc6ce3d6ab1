"""The kit's stack as a session: which apps and settings run, reset between tests, the
processes' URLs and output. `Stack` (hookledger/testing/stack.py) adds what a test drives.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookledger.testing.launch import (
    CRASH_PLAN_FILE,
    Launched,
    Registered,
    Stores,
    launch,
    registrations,
)
from hookledger.testing.waiting import WaitTimeout, wait_for
from local.crash_plan import write_plan
from local.firestore_emulator import reset as reset_firestore
from local.inflight import INFLIGHT_VARIABLE, busy
from local.simulator.client import SimulatorClient
from shared.config import Config

TIMEOUT_S = 10.0  # every call the kit makes to a process of the stack
# How long a test's leftover requests may run on before the functions are started again.
QUIET_S = 30.0


class Running:
    """The session part of `Stack`: the apps and settings the functions run, `reset`,
    the URLs, `close` and `output`."""

    def __init__(self, stores: Stores, *, root: Path, workdir: Path) -> None:
        self._stores = stores
        self._root = root
        self._plan = workdir / CRASH_PLAN_FILE
        self._launched: Launched | None = None
        self._registered = Registered({}, ())
        # The settings this test chose with `use_settings` (None: unset), over os.environ.
        self._chosen: dict[str, str | None] = {}
        self._claims_database = Config().claims_database
        # How long `reset` lets a request a test left running go on before it starts the
        # functions again.
        self.quiet_s = QUIET_S
        self._client: Any = None
        self._tasks: Any = None

    # --- the session ---------------------------------------------------------------------

    def use(self, apps: Sequence[str]) -> None:
        """Run `apps` (module names) with their settings as `os.environ` holds them now (an
        earlier `use_settings` forgotten): the simulator and the functions start again when
        the apps or those settings differ from what runs; the emulators, and what they
        hold, stay."""
        self._chosen = {}
        if self._launched is None or self._launched.apps != tuple(apps):
            self._registered = registrations(apps, self._root)  # a broken app fails here
            self._relaunch(apps)
        elif self._settings_changed():
            self._relaunch(apps)

    def use_settings(self, **values: str | None) -> None:
        """Run the functions with these app settings (`NAME="text"`, as the environment
        gives it; None: unset) over `os.environ`, until the next test. Starts the simulator
        and the functions again (emptied, as `reset` leaves them) when that changes what
        they run with: call it first in the test. KeyError for a name no running app
        declares."""
        unknown = sorted(set(values) - set(self._registered.settings))
        if unknown:
            raise KeyError(
                f"no app of {list(self.apps)} declares the settings {unknown}; they declare "
                f"{sorted(self._registered.settings)}"
            )
        self._chosen = {**self._chosen, **values}
        if self._settings_changed():
            self._relaunch(self.apps)
            self.reset()

    @property
    def settings(self) -> dict[str, str | None]:
        """The running apps' declared settings as the functions got them (None: unset)."""
        env = self._running.env
        return {name: env.get(name) for name in self._registered.settings}

    def _wanted_settings(self) -> dict[str, str | None]:
        """The declared settings this test wants: its `use_settings` over `os.environ`."""
        return {
            name: self._chosen[name] if name in self._chosen else os.environ.get(name)
            for name in self._registered.settings
        }

    def _settings_changed(self) -> list[str]:
        """`NAME: running → wanted` for each declared setting that differs."""
        running, wanted = self.settings, self._wanted_settings()
        return [f"{n}: {running[n]!r} → {wanted[n]!r}" for n in wanted if running[n] != wanted[n]]

    def _check_settings(self) -> None:
        """Refuse to go on when a declared setting changed after the functions started."""
        changed = self._settings_changed()
        if changed:
            raise RuntimeError(
                f"app settings changed after the functions started ({'; '.join(changed)}): "
                "they never see it. Set them before the `hookledger` fixture (monkeypatch "
                "in a fixture listed before it) or with hookledger.use_settings(...)"
            )

    def _relaunch(self, apps: Sequence[str]) -> None:
        """Stop the simulator and the functions, if running, and start them with `apps`."""
        if self._launched is not None:
            self._launched.stop()
            self._launched = None
        self._launched = launch(
            self._stores, apps, root=self._root, workdir=self._plan.parent, settings=self._chosen
        )

    @property
    def apps(self) -> tuple[str, ...]:
        """The apps the functions run now (module names)."""
        return self._running.apps

    @property
    def sim(self) -> SimulatorClient:
        """The simulator's whole control API."""
        return self._running.sim

    @property
    def ingress_url(self) -> str:
        return self._running.ingress_url

    @property
    def worker_url(self) -> str:
        return self._running.worker_url

    @property
    def reconcile_url(self) -> str:
        return self._running.reconcile_url

    @property
    def env(self) -> dict[str, str]:
        """What the functions were started with."""
        return dict(self._running.env)

    @property
    def _running(self) -> Launched:
        if self._launched is None:
            raise RuntimeError("no apps are running: the `hookledger` fixture starts them")
        return self._launched

    def reset(self) -> None:
        """Empty everything a test may have left (the module docstring), once the work it
        started has stopped: the simulator sends no more webhooks, the queue dispatches
        no more tasks, and no function serves a request (else, after `quiet_s`, the
        functions are started again)."""
        write_plan(self._plan, None)
        self.sim.reset()
        self._running.drop_queue(self._tasks_client())
        if not self._quiet(self.quiet_s):
            self._relaunch(self.apps)
        self._running.create_queue(self._tasks_client())
        project = self._running.env["GOOGLE_CLOUD_PROJECT"]
        reset_firestore(self._stores.firestore_host, project)
        reset_firestore(self._stores.firestore_host, project, self._claims_database)
        self.sim.reset()  # again: a request that just ended may have written to it
        self._running.app.restore(self.sim)

    def _quiet(self, timeout_s: float) -> bool:
        """True once no function serves a request; False if one still does after
        `timeout_s`."""
        directory = Path(self._running.env[INFLIGHT_VARIABLE])
        try:
            wait_for(
                lambda: True if not busy(directory) else None,
                timeout_s=timeout_s,
                what=lambda: f"the functions to finish {busy(directory)}",
            )
        except WaitTimeout:
            return False
        return True

    def _tasks_client(self) -> Any:
        if self._tasks is None:
            from shared.handoff.tasks import make_client

            self._tasks = make_client(self._stores.tasks_host)
        return self._tasks

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._launched is not None:
            self._launched.stop()
        self._stores.stop()

    def output(self, name: str) -> str:
        """The last lines a process printed (`firestore`, `cloudtasks`, `simulator`,
        `ingress`, `worker`, `reconcile`): for a failing test's message."""
        running = self._launched.services if self._launched is not None else []
        for service in [*self._stores.services, *running]:
            if service.name == name:
                return service.output()
        raise KeyError(f"no process named {name!r} in the stack")
