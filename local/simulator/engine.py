"""The simulator's behaviour: creating and completing batches and operations and
telling webhooks, through the fault model.

`Simulator` ties the store (`World`), the webhook sender (`Dispatcher`, behind the
`Announcer` that picks each event's targets and copies), the fault injector, the GitHub
file, commit-comment, check-run, issue (pull requests included) and commit-status
stores, the GitHub stubs a test set, the App webhook's delivery log
(`hook_deliveries.py`) and the request log together; the HTTP layer (`app.py`,
`control.py`, the `*_control.py` and `*_routes.py` modules) only parses and answers.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from local.simulator.announcer import WEBHOOK_MODES as WEBHOOK_MODES  # re-exported
from local.simulator.announcer import Announcer, Sent
from local.simulator.apps import Apps
from local.simulator.check_runs import CheckRuns
from local.simulator.comments import CommitComments
from local.simulator.commit_statuses import CommitStatuses
from local.simulator.completion import Completion
from local.simulator.create_refusals import CreateRefusals
from local.simulator.errors import BatchQuotaExceeded, SimError
from local.simulator.files import FileStore
from local.simulator.gemini import build_rows, result_lines
from local.simulator.github import Contents
from local.simulator.github_errors import GitHubErrors
from local.simulator.github_stubs import GitHubStubs
from local.simulator.hook_deliveries import HookDeliveries
from local.simulator.injector import FaultInjector
from local.simulator.issues import Issues
from local.simulator.processing import merged as processing_merged
from local.simulator.quotas import BATCHES_IN_FLIGHT, Quotas
from local.simulator.ratelimits import RateLimits
from local.simulator.records import (
    BATCH_STATES,
    INTERACTION_API_STATUSES,
    WITH_ROWS,
    Batch,
    Operation,
)
from local.simulator.state import World
from local.simulator.traffic import RequestLog
from local.simulator.webhooks import Dispatcher, Target
from shared.clock import Clock, monotonic, system_clock
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET
from shared.logs import event, get_logger

logger = get_logger("simulator.engine")

DEFAULT_FAILURE = {"code": 13, "message": "Simulated batch failure."}
# The row a partially succeeded batch loses when the caller names none.
DEFAULT_ROW_FAILURE = {"error": {"code": 13, "message": "Simulated row failure."}}
CANCELLED_ERROR = {"code": 1, "message": "The batch was cancelled."}


@dataclass
class Settings:
    """What `python -m local.simulator` was started with."""

    webhook_url: str = ""
    webhook_secret: str = LOCAL_GEMINI_SECRET
    auto_complete_s: float | None = None
    webhook_retries: int = 3
    webhook_backoff_s: float = 0.2
    webhook_timeout_s: float = 5.0
    webhook_disable_after: int = 3
    # A created batch reports RUNNING this long after creation (until then PENDING).
    running_after_s: float = 10.0
    # Cancelling is asynchronous: the batch ends CANCELLED this long after the cancel call.
    cancel_after_s: float = 0.2
    # Where GitHub App webhooks (a check run's "Re-run", `POST /_sim/github/webhooks`) go,
    # signed with this secret; GitHub waits this long for an answer.
    github_webhook_url: str = ""
    github_webhook_secret: str = LOCAL_GITHUB_SECRET
    github_webhook_timeout_s: float = 10.0


class Simulator:
    """Everything the HTTP routes act on. `reset()` returns it to a fresh start."""

    def __init__(self, settings: Settings | None = None, clock: Clock = system_clock) -> None:
        self.settings = settings or Settings()
        self.clock = clock
        self.world = World(clock, self.settings.running_after_s)
        self.files = FileStore(clock)
        self.contents = Contents()
        self.comments = CommitComments(clock)
        self.check_runs = CheckRuns(clock)
        self.issues = Issues(clock)
        self.statuses = CommitStatuses(clock)
        self.github_stubs = GitHubStubs()
        self.hook_deliveries = HookDeliveries(clock)
        self.apps = Apps(clock)
        self.rate_limits = RateLimits(clock)
        self.github_errors = GitHubErrors()
        self.requests = RequestLog()
        self.faults = FaultInjector()
        self.quotas = Quotas()
        self.create_refusals = CreateRefusals()
        self.dispatcher = Dispatcher(
            self.world,
            retries=self.settings.webhook_retries,
            backoff_s=self.settings.webhook_backoff_s,
            timeout_s=self.settings.webhook_timeout_s,
            disable_after=self.settings.webhook_disable_after,
        )
        self.announcer = Announcer(self.settings, self.world, self.faults, self.dispatcher)
        self._stop = threading.Event()
        self.completion = Completion(
            self.world,
            lambda batch_id: self.complete_batch(batch_id, "succeeded").name,
            self.settings.auto_complete_s,
            self._stop,
        )
        self._cancels: list[threading.Timer] = []
        self._cancels_lock = threading.Lock()

    def reset(self) -> None:
        self._drop_cancels()
        self.world.reset()
        self.files.reset()
        self.faults.reset()
        self.quotas.reset()
        self.create_refusals.reset()
        self.dispatcher.reset()
        self.contents.reset()
        self.comments.reset()
        self.check_runs.reset()
        self.issues.reset()
        self.statuses.reset()
        self.github_stubs.reset()
        self.hook_deliveries.reset()
        self.apps.reset()
        self.rate_limits.reset()
        self.github_errors.reset()
        self.requests.reset()

    # --- creation ------------------------------------------------------------------

    def create_batch(
        self,
        model: str,
        display_name: str,
        requests: list[dict[str, Any]],
        webhook_uris: tuple[str, ...] = (),
        user_metadata: dict[str, Any] | None = None,
        input_file: str | None = None,
        priority: int = 0,
    ) -> Batch:
        """A new pending batch, as the create call answers it (`input_file`: the uploaded
        file its `requests` came from; its results will be a file too; `priority`: its
        `batch.priority`, its place in the queue, processing.py), or
        `BatchQuotaExceeded` when the `gemini_batches_in_flight` quota is reached
        (`quotas.py`): nothing is created and the refusal is counted.

        With the `early_webhook` fault on, the batch succeeds at once and its webhook
        goes out before this returns (the creator cannot have registered it yet):

            simulator                        receiver             creator
            create batch b (pending)
            complete b, send batch.succeeded ──▶ event for b: unknown
            wait: first attempt per target done
            hold webhook_before_register_ms
            answer create: b, PENDING ──────────────────────────▶ registers b
        """
        try:
            batch = self.world.create_batch(
                model,
                display_name,
                requests,
                webhook_uris,
                user_metadata,
                input_file,
                max_in_flight=self.quotas.settings.batches_in_flight,
                priority=priority,
            )
        except BatchQuotaExceeded:
            self.quotas.count_refusal(BATCHES_IN_FLIGHT)
            raise
        hold_s = self.faults.take_early_webhook()
        if hold_s is None:
            return batch
        _done, sent = self._finish_batch(batch.id, "succeeded", "send", None, None)
        if sent is not None:
            wait_s = self.settings.webhook_timeout_s + 1.0
            self.dispatcher.wait_for_attempts(sent.message.webhook_id, sent.targets, wait_s)
        event(
            logger,
            logging.INFO,
            "early webhook sent before the create answer",
            operation=batch.name,
        )
        if hold_s:
            self.faults.hang(hold_s)
        return batch

    # --- completion ----------------------------------------------------------------

    def complete_batch(
        self,
        batch_id: str,
        state: str,
        webhook: str = "send",
        rows: dict[int, dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
        *,
        echo_metadata: bool = True,
        malformed_lines: frozenset[int] = frozenset(),
    ) -> Batch:
        """Finish a batch as `state` (control word) and send its webhook per `webhook` mode.

        Completing again with the same state re-sends the webhook (a redelivery).
        `echo_metadata=False`: the results carry no request metadata (no key);
        `malformed_lines`: those results-file lines (1-based) are written damaged.
        """
        return self._finish_batch(
            batch_id, state, webhook, rows, error, echo_metadata, malformed_lines
        )[0]

    def _finish_batch(
        self,
        batch_id: str,
        state: str,
        webhook: str,
        rows: dict[int, dict[str, Any]] | None,
        error: dict[str, Any] | None,
        echo_metadata: bool = True,
        malformed_lines: frozenset[int] = frozenset(),
    ) -> tuple[Batch, Sent | None]:
        batch = self.world.batch(batch_id)
        batch_state = BATCH_STATES[state]
        if state == "partially_succeeded" and not any("error" in r for r in (rows or {}).values()):
            rows = {**(rows or {}), len(batch.requests) - 1: DEFAULT_ROW_FAILURE}
        built_rows = build_rows(batch, rows or {}, echo_metadata) if state in WITH_ROWS else None
        failure = None
        if state == "failed":
            failure = error or DEFAULT_FAILURE
        elif state == "cancelled":
            failure = CANCELLED_ERROR
        output_file = None
        if built_rows is not None and batch.input_file is not None:
            output_file = f"files/batch-{batch.id}-results"
            lines = result_lines(built_rows, malformed_lines)
            self.files.put_generated(output_file, lines, f"{batch.name} results")
        batch, _changed = self.world.finish_batch(
            batch_id, batch_state, built_rows, failure, output_file
        )
        # No event names a partial success: Gemini's batch events are the four end states.
        event_type = "batch.succeeded" if state == "partially_succeeded" else f"batch.{state}"
        return batch, self.announcer.announce(event_type, batch.name, webhook, batch)

    def cancel_batch(self, batch_id: str) -> Batch:
        """The Gemini API's cancel, asynchronous as Gemini's: the call answers at once and
        the batch ends CANCELLED (with its webhook) `cancel_after_s` later. Only a batch
        still pending or running can be cancelled (else FailedPrecondition)."""
        before = self.world.batch(batch_id)
        if before.cancelling and not before.done:
            return before  # one cancel in flight is enough: one webhook
        batch = self.world.mark_cancelling(batch_id)
        timer = threading.Timer(self.settings.cancel_after_s, self._finish_cancel, (batch_id,))
        timer.daemon = True
        with self._cancels_lock:
            self._cancels = [t for t in self._cancels if t.is_alive()] + [timer]
        timer.start()
        return batch

    def _finish_cancel(self, batch_id: str) -> None:
        try:
            self.complete_batch(batch_id, "cancelled")
        except SimError as exc:  # completed, deleted or reset meanwhile
            event(
                logger,
                logging.INFO,
                "cancel found the batch already gone or ended",
                operation=f"batches/{batch_id}",
                reason=exc.message,
            )

    def _drop_cancels(self) -> None:
        with self._cancels_lock:
            timers, self._cancels = self._cancels, []
        for timer in timers:
            timer.cancel()

    def complete_operation(
        self,
        name: str,
        state: str,
        webhook: str = "send",
        response: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> Operation:
        """Finish a generic operation; videos (on success) and interactions send an event."""
        failure = None
        if state == "failed":
            failure = error or {"code": 13, "message": "Simulated operation failure."}
        elif state == "cancelled":
            failure = {"code": 1, "message": "The operation was cancelled."}
        elif state == "expired":
            failure = {"code": 4, "message": "The operation expired."}
        payload = None if failure else (response or {"@type": "simulated", "name": name})
        operation, _changed = self.world.finish_operation(name, state, payload, failure)
        event = operation.event_for(state)
        if event is not None:
            self.announcer.announce(event, name, webhook, operation)
        return operation

    def set_interaction_status(
        self,
        name: str,
        status: str,
        webhook: str = "send",
        output_text: str | None = None,
        error: dict[str, Any] | None = None,
    ) -> Operation:
        """Put an interaction in any Interactions API status (waiting ones included) and
        send the event Gemini sends on reaching it, if there is one."""
        if status == "failed" and error is None:
            error = {"code": 13, "message": "Simulated interaction failure."}
        operation = self.world.set_interaction_status(name, status, output_text, error)
        _ends, event_type = INTERACTION_API_STATUSES[status]
        if event_type is not None:
            self.announcer.announce(event_type, name, webhook, None)
        return operation

    # --- webhooks (announcer.py) ----------------------------------------------------

    def targets(self, event_type: str, job: Batch | Operation | None) -> list[Target]:
        """Per-job webhook URIs replace the project's webhooks, as in Gemini's dynamic webhooks."""
        return self.announcer.targets(event_type, job)

    def ping(self, webhook_id: str) -> None:
        """Send a signed `webhook.ping` event to one registered webhook."""
        self.announcer.ping(webhook_id)

    # --- auto-complete and processing (completion.py, processing.py) --------------------

    def set_processing(self, body: dict[str, Any]) -> dict[str, Any]:
        """Merge `body` into how batches run; a bad body changes nothing. Starts the
        completion loop when batches now succeed on their own. The full state."""
        self.world.set_processing(processing_merged(self.world.processing, body))
        self.completion.start()
        return self.world.processing_report()

    def start_auto_complete(self) -> None:
        """With `auto_complete_s` set, batches succeed on their own that long after creation
        (after they started, when processing has slots)."""
        self.completion.start()

    def complete_due(self) -> list[str]:
        """One pass of the completion loop: the batches it succeeded, in order."""
        return self.completion.step()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the auto-complete loop and let in-flight webhook deliveries finish."""
        self._stop.set()
        self._drop_cancels()
        deadline = monotonic() + timeout
        self.completion.join(timeout)
        self.dispatcher.wait_idle(max(0.0, deadline - monotonic()))
