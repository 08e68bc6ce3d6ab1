"""Reconcile: find every operation a webhook missed and settle it the way the worker does.

Webhooks are the fast path, never the only one (docs/architecture.md, "Reconcile"). A run,
called by Cloud Scheduler:

1. reads the due operations page by page (`status == pending`, `next_check_at <= now`,
   ordered, cursor-paged: `ledger.operations.due_pending`), never the whole collection;
2. checks each through `settle_from_gemini(..., by="reconcile")` with at most
   `concurrency` Gemini calls in flight: terminal → settled once, with the same
   write-back as the webhook path; still running, Gemini unavailable (429/5xx/timeout),
   not found or rejected → left pending, `attempts + 1`, `next_check_at` pushed back
   by `settings.backoff` (`shared.retry.Backoff`: capped, jittered, exponential;
   30 s → 30 min by default, `RECONCILE_BACKOFF_*`). Nothing is ever settled from an error;
3. adopts orphans: for the submissions still open (claimed, no winner, lease over: a
   crash between create and register may have left a batch), it lists Gemini's batches
   newest first down to the oldest claim, registers the ones tagged with an open claim's
   tag that the ledger does not know, then checks them; with no open claim it lists
   nothing (`adoption`), and batches just read as due cost no second read;
4. reports an operation pending longer than `stuck_after_s` with one ERROR log
   (`alert="operation_stuck"`, `operation`, `kind`, `age_s`) per alert window, recorded
   as `stuck_alerted_at` on the operation by a conditional write, so overlapping runs
   alert once; a stuck operation is never closed;
5. sweeps settled operations whose outbox is unfinished (`ledger.outbox.sweep`);
6. stops taking new work once `budget_s` is spent (monotonic clock) and logs how far it
   got; due operations stay due, so the next run resumes.

When more than `fanout_threshold` operations are due, the run does not poll them itself:
it hands each page to `enqueue_page(page)` (a Cloud Task per page, deterministic names,
see `page_task_id`) and the worker calls `Reconciler.check_names(names)` for the page,
which is the same check as above.

Overlapping runs, and a run racing the webhook, are safe: the ledger settles each
operation once, and `defer` does nothing once an operation is settled.

Modules: `settings` (ReconcileSettings), `report` (RunReport, Budget), `selection` (due
pages), `pool` (bounded concurrency), `check` (one operation), `stuck` (alerts),
`adoption` (orphans), `fanout` (check-page tasks), `outbox_sweep` (deliverers), `run`
(the Reconciler). This facade re-exports what callers import from `shared.reconcile`.
"""

from __future__ import annotations

from shared.reconcile.adoption import (
    ORPHAN_WINDOW,
    OrphanAdopter,
    register_orphan,
)
from shared.reconcile.check import BY, OperationCheck
from shared.reconcile.fanout import (
    CHECK_PAGE_EVENT,
    CHECK_PAGE_SOURCE,
    MAX_PAGE_NAMES,
    EnqueuePage,
    TaskPageEnqueuer,
    page_names,
    page_payload,
    page_task_id,
    window_key,
)
from shared.reconcile.outbox_sweep import Deliver
from shared.reconcile.report import Budget, Progress, RunReport
from shared.reconcile.run import Reconciler, Sources
from shared.reconcile.settings import (
    BACKOFF_CAP_S,
    BACKOFF_FIRST_S,
    BACKOFF_JITTER,
    DEFAULT_BACKOFF,
    DRAIN_S,
    GEMINI_MAX_PENDING,
    ReconcileSettings,
)
from shared.reconcile.stuck import STUCK_ALERTED_AT, StuckAlerts

__all__ = [
    "BACKOFF_CAP_S",
    "BACKOFF_FIRST_S",
    "BACKOFF_JITTER",
    "BY",
    "CHECK_PAGE_EVENT",
    "CHECK_PAGE_SOURCE",
    "DEFAULT_BACKOFF",
    "DRAIN_S",
    "GEMINI_MAX_PENDING",
    "MAX_PAGE_NAMES",
    "ORPHAN_WINDOW",
    "STUCK_ALERTED_AT",
    "Budget",
    "Deliver",
    "EnqueuePage",
    "OperationCheck",
    "OrphanAdopter",
    "Progress",
    "ReconcileSettings",
    "Reconciler",
    "RunReport",
    "Sources",
    "StuckAlerts",
    "TaskPageEnqueuer",
    "page_names",
    "page_payload",
    "page_task_id",
    "register_orphan",
    "window_key",
]
