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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from hookledger.sending import Sent, send_event
from hookledger.testing.accounts import EXAMPLES_INSTALLATION
from hookledger.testing.launch import (
    CRASH_PLAN_FILE,
    PROJECT,
    Launched,
    Registered,
    Stores,
    launch,
    registrations,
)
from hookledger.testing.waiting import WaitTimeout, wait_for
from local.crash_plan import check_point, disarm, read_plan, write_plan
from local.firestore_emulator import client_on
from local.firestore_emulator import reset as reset_firestore
from local.inflight import INFLIGHT_VARIABLE, busy
from local.simulator.client import SimulatorClient
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET, Config
from shared.ledger.records import (
    DELIVERIES,
    FINISHED_DELIVERY_STATUSES,
    OPERATIONS,
    SUPERSEDED,
    TERMINAL_STATUSES,
)

Payload = Mapping[str, Any] | bytes | str | Path
TIMEOUT_S = 10.0  # every call the kit makes to a process of the stack
# How long a test's leftover requests may run on before the functions are started again.
QUIET_S = 30.0


@dataclass(frozen=True)
class Crashes:
    """What a `crash_at` plan did: `crashed` lists `{"pid", "point"}` per death, also
    after the `with` block (until the next test)."""

    plan_path: Path

    @property
    def crashed(self) -> list[dict[str, Any]]:
        return list(read_plan(self.plan_path).get("crashed", []))


class Stack:
    """The session's running pipeline; see the module docstring and docs/apps.md."""

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

    # --- sending -------------------------------------------------------------------------

    def send_github(self, event: str, payload: Payload, *, delivery_id: str | None = None) -> Sent:
        """POST `payload` to the ingress as GitHub's `event`, signed as GitHub signs it."""
        self._check_settings()
        return send_event(
            self.ingress_url,
            "github",
            event,
            _body(payload),
            secret=LOCAL_GITHUB_SECRET,
            delivery_id=delivery_id,
        )

    def send_gemini(self, event: str, payload: Payload, *, delivery_id: str | None = None) -> Sent:
        """POST `payload` (its `type` must be `event`) as a Gemini static webhook."""
        self._check_settings()
        return send_event(
            self.ingress_url,
            "gemini",
            event,
            _body(payload),
            secret=LOCAL_GEMINI_SECRET,
            delivery_id=delivery_id,
        )

    def wait_handled(
        self, sent_or_delivery_id: Sent | str, *, source: str = "github", timeout_s: float = 60.0
    ) -> dict[str, str]:
        """Wait until every app's record of the delivery is final; app name -> status
        (`done`, `ignored`, `dead`, `unresolved`). `{}` when the ingress itself ignored it
        (no app takes the event, or every app refused its payload): nothing was queued.
        `source` is for a bare delivery id; a `Sent` knows where it was sent."""
        if isinstance(sent_or_delivery_id, Sent):
            sent = sent_or_delivery_id
            source = sent.source
            status = sent.answer.get("status") if isinstance(sent.answer, dict) else None
            if sent.status == 200 and status in ("ignored", "pong"):
                return {}
            if sent.status != 202:
                raise AssertionError(
                    f"delivery {sent.delivery_id} was not accepted: the ingress answered "
                    f"{sent.status} {sent.answer!r}"
                )
            delivery_id = sent.delivery_id
        else:
            delivery_id = sent_or_delivery_id
        seen: dict[str, Any] = {}

        def finished() -> dict[str, str] | None:
            record = self._delivery(source, delivery_id)
            seen["record"] = record
            if record is None or record.get("status") not in FINISHED_DELIVERY_STATUSES:
                return None
            apps = self._registered.handlers.get(f"{source}:{record.get('event')}", [])
            if len(apps) <= 1:  # one app runs under the delivery's own record
                return {(apps[0] if apps else "?"): str(record["status"])}
            ends = {app: self._delivery(source, f"{delivery_id}#{app}") for app in apps}
            return {app: str(end["status"]) for app, end in ends.items() if end is not None}

        return wait_for(
            finished,
            timeout_s=timeout_s,
            what=lambda: (
                f"{source} delivery {delivery_id} to be handled; "
                f"its record: {_brief(seen.get('record'))}"
            ),
        )

    def _delivery(self, source: str, delivery_id: str) -> dict[str, Any] | None:
        from shared.ledger.ids import delivery_id as doc_id

        snapshot = self.firestore.collection(DELIVERIES).document(doc_id(source, delivery_id)).get()
        return snapshot.to_dict() if snapshot.exists else None

    # --- GitHub and Gemini at the simulator ----------------------------------------------

    def put_file(self, repo: str, path: str, sha: str, data: bytes) -> str:
        """Store `data` as `path` of `repo` ("owner/name") at commit `sha`; its blob sha."""
        owner, _, name = repo.partition("/")
        if not owner or not name:
            raise ValueError(f"repo must be 'owner/name', got {repo!r}")
        return self.sim.put_file(owner, name, path, sha, data)

    def batches(self) -> list[dict[str, Any]]:
        """Every batch the simulator holds, each with its requests' `keys`."""
        return [_with_keys(batch) for batch in self.sim.batches()]

    def wait_batch(self, display_name_prefix: str, *, timeout_s: float = 60.0) -> dict[str, Any]:
        """The first batch whose display name starts with the prefix, once created."""

        def found() -> dict[str, Any] | None:
            return next(
                (b for b in self.batches() if b["display_name"].startswith(display_name_prefix)),
                None,
            )

        return wait_for(
            found,
            timeout_s=timeout_s,
            what=lambda: (
                f"a batch named {display_name_prefix}…; the simulator holds "
                f"{[b['display_name'] for b in self.batches()]}"
            ),
        )

    def complete_batch(
        self, name: str, *, rows: Any = None, webhook: str = "send"
    ) -> dict[str, Any]:
        """Batch `name` succeeds (`rows`: per-request results, local/simulator/control.py);
        `webhook`: "send", "drop" (reconcile must find it) or "duplicate"."""
        extra = {} if rows is None else {"rows": rows}
        return self.sim.complete(name, "succeeded", _webhook(webhook), **extra)

    def fail_batch(self, name: str, *, webhook: str = "send") -> dict[str, Any]:
        """Batch `name` fails as a whole."""
        error = {"code": 13, "message": "the batch failed (hookledger test kit)"}
        return self.sim.complete(name, "failed", _webhook(webhook), error=error)

    def wait_settled(self, name: str, *, timeout_s: float = 60.0) -> dict[str, Any]:
        """Operation `name`'s record once it is terminal (or superseded): its settling commit,
        which holds the write-back, is done. Its outbox items (a comment, a check run) may
        still be open: `wait_delivered` waits for those."""
        seen: dict[str, Any] = {}

        def settled() -> dict[str, Any] | None:
            record = self.operation(name)
            seen["record"] = record
            return record if record is not None and _final(record) else None

        return wait_for(
            settled,
            timeout_s=timeout_s,
            what=lambda: f"operation {name} to settle; its record: {_brief(seen.get('record'))}",
        )

    def wait_delivered(
        self, name: str, *, sweep: bool = False, timeout_s: float = 60.0
    ) -> dict[str, Any]:
        """Operation `name`'s record once it is settled and every outbox item delivered;
        AssertionError at once, naming the item and why, when one is given up.

        The settling call delivers the items right after its commit. An item it left (it
        crashed after the commit, or the deliverer failed and backs off) is delivered by
        reconcile's sweep only, and the kit runs no scheduler: call `reconcile()`, or pass
        `sweep=True` to run it whenever an item is open, unclaimed and due.
        """
        seen: dict[str, Any] = {}

        def delivered() -> dict[str, Any] | None:
            record = self.operation(name)
            seen["record"] = record
            if record is None or not _final(record):
                return None
            for item in record["outbox"]:
                if item.get("given_up_at") is not None:
                    raise AssertionError(
                        f"operation {name}: outbox item {item['idempotency_key']} was given up: "
                        f"{item.get('given_up_reason')}"
                    )
            waiting = [item for item in record["outbox"] if item.get("delivered_at") is None]
            if not waiting:
                return record
            if sweep and any(_sweepable(item) for item in waiting):
                self.reconcile()
            return None

        return wait_for(
            delivered,
            timeout_s=timeout_s,
            what=lambda: (
                f"operation {name}'s outbox to be delivered; its record: "
                f"{_brief(seen.get('record'))}, open items: {_open_items(seen.get('record'))}"
                + ("" if sweep else " (an item left to the sweep needs reconcile(), or sweep=True)")
            ),
        )

    def reconcile(self) -> dict[str, Any]:
        """One reconcile run, as Cloud Scheduler starts it; its report."""
        self._check_settings()
        answer = requests.post(f"{self.reconcile_url}/", json={}, timeout=120)
        if answer.status_code != 200:
            raise AssertionError(f"reconcile answered {answer.status_code}: {answer.text[:500]}")
        return dict(answer.json())

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

    def github_errors(self, status: int = 503, times: int = 1) -> dict[str, Any]:
        """GitHub answers `status` (500..599) to the next `times` calls, whatever the route."""
        return self.sim.github_errors(status=status, count=times)

    def github_api(self, installation_id: int = EXAMPLES_INSTALLATION) -> Any:
        """GitHub at the simulator as the kit's App acting for `installation_id` (default:
        Codertocat's, 1) sees it, to read what the functions did: a handler's
        `ctx.github_api` (`call(operation_id, **params)`, `request(method, path)`)."""
        from shared.github.app import AppAuth, AppCredentials
        from shared.github.rest import GitHubApi

        app, url = self._running.app, self._running.env["GITHUB_API_URL"]
        auth = AppAuth(AppCredentials.from_pem(app.client_id, app.private_key), url)
        return GitHubApi(url, auth=auth, timeout_s=TIMEOUT_S).bound(installation_id=installation_id)

    def stub_github(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int | None = None,
    ) -> dict[str, Any]:
        """GitHub answers `method path` (exact, or `{name}` segments matching any one) with
        `status`, `body` (JSON) and `headers`, ahead of any simulated route, the next
        `times` times (None: the whole test); the simulator's stub record."""
        return self.sim.stub_github(method, path, status, body, headers, times)

    def github_rate_limited(self, times: int = 1, *, status: int = 403) -> dict[str, Any]:
        """GitHub's secondary rate limit (403 or 429, `retry-after: 1`) on the next `times`
        calls, whatever the route."""
        return self.sim.github_rate_limited(count=times, status=status, retry_after_s=1)

    # --- what is stored ------------------------------------------------------------------

    @property
    def firestore(self) -> Any:
        """A Firestore client on the stack's emulator (the ledger's database)."""
        if self._client is None:
            self._client = client_on(self._stores.firestore_host, PROJECT)
        return self._client

    def documents(self, collection: str) -> dict[str, dict[str, Any]]:
        """Every document of `collection`, by id."""
        return {s.id: s.to_dict() for s in self.firestore.collection(collection).stream()}

    def operation(self, name: str) -> dict[str, Any] | None:
        """Operation `name` (`batches/abc`) as the ledger reads it, or None."""
        from shared.ledger.ids import operation_id
        from shared.ledger.records import operation_from_snapshot

        snapshot = self.firestore.collection(OPERATIONS).document(operation_id(name)).get()
        return operation_from_snapshot(snapshot).to_dict() if snapshot.exists else None

    def operations(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every operation (of `kind`), as the ledger reads it, oldest first."""
        from shared.ledger.records import operation_from_snapshot

        found = [
            operation_from_snapshot(s).to_dict()
            for s in self.firestore.collection(OPERATIONS).stream()
        ]
        chosen = [op for op in found if kind is None or op["kind"] == kind]
        return sorted(chosen, key=lambda op: (op["submitted_at"], op["name"]))

    def queued_tasks(self) -> list[str]:
        """The names of the tasks waiting in the stack's Cloud Tasks queue."""
        client = self._tasks_client()
        tasks = client.list_tasks(parent=self._running.queue_path, timeout=TIMEOUT_S)
        return [task.name for task in tasks]

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


def _body(payload: Payload) -> bytes | str | Mapping[str, Any]:
    """A recorded body's bytes for a path; anything else as `send_event` takes it."""
    return payload.read_bytes() if isinstance(payload, Path) else payload


def _webhook(webhook: str) -> str:
    if webhook not in ("send", "drop", "duplicate"):
        raise ValueError(f'webhook must be "send", "drop" or "duplicate", got {webhook!r}')
    return webhook


def _with_keys(batch: Mapping[str, Any]) -> dict[str, Any]:
    keys = [(r.get("metadata") or {}).get("key") for r in batch.get("requests", [])]
    return {**batch, "keys": keys}


def _final(record: Mapping[str, Any]) -> bool:
    """Settled (terminal) or superseded: no commit will change its status again."""
    return record["status"] in TERMINAL_STATUSES or record["status"] == SUPERSEDED


def _sweepable(item: Mapping[str, Any]) -> bool:
    """An open item reconcile's sweep would take now: no live claim, and due."""
    now = datetime.now(UTC)
    return all(
        not isinstance(item.get(f), datetime) or item[f] <= now
        for f in ("claimed_until", "next_attempt_at")
    )


def _open_items(record: Mapping[str, Any] | None) -> list[str]:
    shown = ("attempts", "last_error", "claimed_until", "next_attempt_at")
    items = (record or {}).get("outbox", [])
    return [
        f"{item['idempotency_key']} {_fields(item, shown)}"
        for item in items
        if item.get("delivered_at") is None and item.get("given_up_at") is None
    ]


def _fields(record: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {k: record[k] for k in names if record.get(k) is not None}


def _brief(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "none yet"
    shown = ("status", "event", "attempts", "last_error", "writeback_done", "error")
    return repr(_fields(record, shown))
