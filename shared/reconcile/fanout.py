"""Fan-out: when too many operations are due, each page becomes a Cloud Task for the worker.

Task ids are deterministic (`page_task_id`): overlapping runs in one window name the same
tasks, and Cloud Tasks refuses the second, so no page is checked twice per window.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from shared import logs
from shared.handoff.tasks import task_id_for
from shared.ledger import Operation
from shared.reconcile.report import Budget, RunReport

log = logs.get_logger("reconcile")

CHECK_PAGE_SOURCE = "hookledger"
CHECK_PAGE_EVENT = "check-page"
MAX_PAGE_NAMES = 1000

EnqueuePage = Callable[[Sequence[Operation], str], Any]
"""`enqueue_page(page, task_id)`: hand one page of due operations to a worker (idempotent
on `task_id`: a second call with the same id must not create a second task)."""


def window_key(now: datetime, window_s: float) -> str:
    """The fan-out window `now` falls in; page task ids are stable within it."""
    return f"w{int(now.timestamp() // window_s)}"


def page_task_id(window: str, page: Sequence[Operation]) -> str:
    """A Cloud Tasks id for one page: same window and same first/last operation, same id,
    so overlapping runs in one window do not double a page."""
    return task_id_for("reconcile-page", window, page[0].name, page[-1].name, str(len(page)))


def page_payload(page: Sequence[Operation]) -> bytes:
    """The body of one check-page task: `{"names": [...]}`."""
    return json.dumps({"names": [record.name for record in page]}).encode("utf-8")


def page_names(body: bytes) -> list[str]:
    """The operation names in a check-page body; `ValueError` naming the problem otherwise."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"check-page body is not JSON: {exc}") from None
    names = data.get("names") if isinstance(data, dict) else None
    if not isinstance(names, list) or not names or len(names) > MAX_PAGE_NAMES:
        raise ValueError(f"check-page body needs 'names': a list of 1..{MAX_PAGE_NAMES} names")
    if not all(isinstance(name, str) and name for name in names):
        raise ValueError("check-page 'names' must all be non-empty strings")
    return names


def fan_out(
    pages: Iterable[list[Operation]],
    enqueue_page: EnqueuePage,
    window: str,
    report: RunReport,
    budget: Budget,
) -> None:
    """Enqueue each page under its `page_task_id`; stop when the budget is spent.

    A page whose enqueue fails is logged and counted as an error; it stays due, so the
    next run enqueues it.
    """
    for page in pages:
        if budget.spent():
            report.stop("fanout", page[0].name)
            return
        task_id = page_task_id(window, page)
        try:
            enqueue_page(page, task_id)
        except Exception as exc:  # a failed page stays due: the next run enqueues it
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                f"enqueuing check page {task_id} failed",
                task_id=task_id,
                first=page[0].name,
                last=page[-1].name,
                reason=str(exc),
            )
            continue
        report.add(fanned_out_pages=1, fanned_out_ops=len(page))
        report.last_examined = page[-1].name


class TaskPageEnqueuer:
    """`enqueue_page` for production: one named Cloud Task per page, POSTed to `url`.

    `seal(task_id, payload) -> bytes` wraps the payload the way the worker verifies it
    (a signed envelope). A page already enqueued under the same id counts as done.
    """

    def __init__(
        self,
        queue: Any,
        url: str,
        seal: Callable[[str, bytes], bytes],
        *,
        oidc_service_account: str | None = None,
        oidc_audience: str | None = None,
        dispatch_deadline_s: float | None = None,
    ) -> None:
        self._queue = queue
        self._url = url
        self._seal = seal
        self._oidc_service_account = oidc_service_account
        self._oidc_audience = oidc_audience
        self._dispatch_deadline_s = dispatch_deadline_s

    def __call__(self, page: Sequence[Operation], task_id: str) -> str:
        """Create the task; returns `created` or `duplicate`. Raises `tasks.EnqueueError`."""
        result = self._queue.enqueue(
            self._url,
            self._seal(task_id, page_payload(page)),
            {"Content-Type": "application/json"},
            task_id=task_id,
            oidc_service_account=self._oidc_service_account,
            oidc_audience=self._oidc_audience,
            dispatch_deadline_s=self._dispatch_deadline_s,
        )
        return str(result.status)
