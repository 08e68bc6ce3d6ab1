"""Sends due tasks to their HTTP targets, one thread per attempt, and reports the outcome.

A 2xx answer completes the task; any other answer, a dispatch deadline overrun or a
connection failure is a failed attempt, which the store schedules for retry.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from local.cloudtasks_emulator.attempts import DispatchJob, Outcome, http_to_rpc
from local.cloudtasks_emulator.journal import JournalError
from local.cloudtasks_emulator.oidc import TokenMinter
from local.cloudtasks_emulator.store import Store

DEADLINE_EXCEEDED, UNAVAILABLE = 4, 14  # google.rpc.Code


def send(job: DispatchJob, headers: dict[str, str]) -> Outcome:
    """Perform one HTTP request; never raises."""
    parts = urlsplit(job.url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    started = time.monotonic()
    conn = connection_class(parts.hostname or "", parts.port, timeout=job.deadline_s)
    try:
        conn.putrequest(job.method, target, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        if job.body or job.method in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(job.body)))
        conn.endheaders(job.body or None)
        response = conn.getresponse()
        response.read()
        if time.monotonic() - started > job.deadline_s:
            return Outcome(None, DEADLINE_EXCEEDED, "dispatch deadline exceeded")
        return Outcome(
            response.status,
            http_to_rpc(response.status),
            f"HTTP status {response.status}",
            retry_after=response.getheader("Retry-After"),
        )
    except TimeoutError:
        return Outcome(None, DEADLINE_EXCEEDED, "dispatch deadline exceeded")
    except (OSError, http.client.HTTPException) as exc:
        return Outcome(None, UNAVAILABLE, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


class Dispatcher:
    def __init__(self, store: Store, minter: TokenMinter, log: Callable[[str], None]) -> None:
        self.store = store
        self.minter = minter
        self.log = log
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dispatcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self.store.cond:
            self.store.cond.notify_all()
        self._thread.join(timeout=5)

    def launch(self, job: DispatchJob) -> None:
        threading.Thread(target=self._attempt, args=(job,), daemon=True).start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            # Taking work and waiting under one lock hold: a notify cannot fall between them.
            with self.store.cond:
                try:
                    jobs, wait = self.store.take_due()
                except JournalError as exc:
                    # Nothing is sent that could not be recorded; try again shortly.
                    self.log(f"error dispatch: cannot record the next attempts: {exc}")
                    jobs, wait = [], 1.0
                for job in jobs:
                    self.launch(job)
                if not jobs and not self._stopped.is_set():
                    self.store.cond.wait(timeout=wait)

    def _attempt(self, job: DispatchJob) -> None:
        headers = dict(job.headers)
        if job.oidc_email:
            token = self.minter.mint(job.oidc_email, job.oidc_audience or job.url)
            headers["Authorization"] = f"Bearer {token}"
        started = time.monotonic()
        outcome = send(job, headers)
        try:
            fate = self.store.complete(job, outcome)
        except JournalError as exc:
            fate = f"not recorded ({exc}); a restart sends it again"
        answer = outcome.http_status if outcome.http_status is not None else outcome.message
        short = job.task_name.rsplit("/", 1)[-1]
        self.log(
            f"dispatch queue={job.queue_id} task={short} attempt={job.attempt} "
            f"{job.method} {job.url} -> {answer} in {1000 * (time.monotonic() - started):.0f} ms; "
            f"{fate}"
        )
