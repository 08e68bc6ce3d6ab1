"""The review as ONE GitHub check run per push, `in_progress` then `completed`.

Two outbox items carry it, both `{"kind": "github-check-run", role, repo, sha, operation,
external_id, installation_id, details_url}`:

- `start`, recorded on the PENDING operation in the commit that registers the push's
  winner (`register_winner(outbox=…)`), delivered by the worker right after it, and by the
  outbox sweep if the worker dies first;
- `finish`, recorded by the settling commit (the kind's `outbox`) when the operation
  carries a `start` item, or, for a winner registered without one (an adopted orphan),
  whenever check runs are on.

Both are delivered by `publish_check_run`, which computes the state from the ledger AT
DELIVERY, so every delivery of either item is the same idempotent publish:

    operation pending → `in_progress`, `if_absent` (a run found is left as it is)
                        then the operation is read again: settled meanwhile → as below
    operation settled → `completed` from the push's reviews (checks.py)

A "Re-run" (`reruns.py`) makes a new operation whose context names the push's
submission (`check_submission`): its items carry that submission's id as `external_id`, so
they publish on the SAME run, and they reset it (no `if_absent`). GitHub never removes an
annotation, so every generation's annotations stay on the run: each completion marks its
own with its operation (`checks.annotation_mark`) and `ChecksClient.publish` counts, at
publish time, those the run holds, so it appends exactly the rest. Only the push's
CURRENT operation publishes (`Submission.current_operation`, docs "Re-run"): an item of an
older generation, delivered late, is done without a write.

The run is found by name and `external_id` = the push's submission id (`ChecksClient.
publish`: oldest wins, newer duplicates completed as pointers to it). A `finish` waits
while its operation's `start` is open, so the two never publish at once and never append
the same annotations twice: while another deliverer holds the `start` (publishing it now,
a few GitHub calls) the `finish` re-reads for up to `START_WAIT` (~8 s), then, or at once
when nobody holds the `start`, it is retried later (`StartStillOpen`). The timeline is in
docs/architecture.md, "Check runs". The item's lease (`item.lease`) is the publish's
ownership.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from apps.review import checks
from apps.review.results import reviews_for_push
from shared import api
from shared.api import DeliveryServices, PermanentError, TransientError
from shared.api.ledger import Backoff, submission_id

if TYPE_CHECKING:
    from shared.api import Clock
    from shared.api.ledger import Operation, OutboxItem

log = api.get_logger("review")

CHECK_RUN = "github-check-run"  # the outbox payload kind delivered here
# How a `finish` waits for the `start` another deliverer is publishing: 0.25 s doubling to
# 2 s, six waits (~8 s at most), far inside the finish's own lease (OUTBOX_LEASE_S).
START_WAIT = Backoff(attempts=6, first_s=0.25, cap_s=2.0, jitter=0.0)
_sleep = time.sleep  # tests replace it
START, FINISH = "start", "finish"
# Context field of a re-run's operation (`reruns.py`): the push's submission whose check
# run it shows (older operations may also hold `annotations_before`: ignored).
CHECK_SUBMISSION = "check_submission"


class StartStillOpen(TransientError):
    """A `finish` item met its operation's `start` item still open: it is retried after it,
    so only one of them publishes at a time."""


def details_url(console_url: str, operation: str) -> str | None:
    """The operation's page in the console (`/operations/<name>`), or None without one."""
    if not console_url:
        return None
    return f"{console_url.rstrip('/')}/operations/{quote(operation, safe='/')}"


def item(
    role: str,
    record_context: Mapping[str, Any],
    operation: str,
    submission: str,
    console_url: str,
) -> dict[str, Any] | None:
    """The outbox payload of `role` (START or FINISH) for the push in `record_context`, or
    None when the push has no check run (no repo, sha or App installation)."""
    repo, sha = record_context.get("repo"), record_context.get("sha")
    installation = record_context.get("installation_id")
    shown = record_context.get(CHECK_SUBMISSION)  # a re-run publishes on the push's run
    submission = shown if isinstance(shown, str) and shown else submission
    if not (isinstance(repo, str) and isinstance(sha, str) and repo and sha and submission):
        return None
    if type(installation) is not int:  # only a GitHub App can write check runs
        return None
    return {
        "kind": CHECK_RUN,
        "role": role,
        "repo": repo,
        "sha": sha,
        "operation": operation,
        "external_id": submission_id(submission),
        "installation_id": installation,
        "details_url": details_url(console_url, operation),
    }


def has_start(record: Operation) -> bool:
    """Whether `record` carries a `start` item (a check run shown while it was pending)."""
    return any(_role(i.payload) == START for i in record.outbox)


def publish_check_run(item: OutboxItem, services: DeliveryServices) -> None:
    """Make the push's check run show what the ledger says now (module docstring)."""
    payload = item.payload if isinstance(item.payload, Mapping) else {}
    repo, sha, operation = payload.get("repo"), payload.get("sha"), payload.get("operation")
    external_id, installation_id = payload.get("external_id"), payload.get("installation_id")
    fields = (repo, sha, operation, external_id)
    if not all(isinstance(f, str) and f for f in fields) or type(installation_id) is not int:
        raise PermanentError(f"outbox item {item.idempotency_key}: not a github-check-run payload")
    assert isinstance(repo, str) and isinstance(sha, str) and isinstance(operation, str)
    assert isinstance(external_id, str)
    link = payload.get("details_url") if isinstance(payload.get("details_url"), str) else None
    record = services.ledger.operations.get(operation)
    if record is None:
        raise PermanentError(f"outbox item {item.idempotency_key}: {operation} is not recorded")
    if _role(payload) == FINISH:
        # The ledger's clock, which stamped the start's lease: the item's lease carries it.
        record = _after_start(record, services, item.lease.clock if item.lease else None)

    if left_to_newer("check run", record, services, item):
        return
    rerun = isinstance(record.context.get(CHECK_SUBMISSION), str)

    def publish(state: checks.CheckRunState, *, if_absent: bool = False) -> Any:
        return services.checks.publish(
            repo,
            sha,
            state,
            ownership=item.lease,
            if_absent=if_absent,
            installation_id=installation_id,
        )

    if record.pending:
        paths = [str(p) for p in record.context.get("paths") or []]
        shown = publish(
            checks.in_progress(sha, paths, external_id=external_id, details_url=link),
            if_absent=not rerun,  # a re-run resets the completed run; a push never reopens it
        )
        # A settlement that committed before this read finds nothing to complete if its
        # completion listed before our create: complete it here (docs, "Check runs").
        record = services.ledger.operations.get(operation)
        if record is None or record.pending:
            _logged("check run in progress", shown, operation, repo, sha, item)
            return
    reviews = reviews_for_push(services.ledger, repo, sha)
    state = checks.completed(
        sha,
        reviews,
        external_id=external_id,
        completed_at=record.settled_at or record.submitted_at,
        details_url=link,
        cancelled=_cancelled(record),
        operation=operation,  # its annotations marked: counted on the run at publish time
    )
    _logged("check run completed", publish(state), operation, repo, sha, item)


def _after_start(record: Operation, services: DeliveryServices, clock: Clock | None) -> Operation:
    """`record` once its `start` item is closed, re-read while another deliverer holds it
    (a batch settled seconds after its push); `StartStillOpen` when it stays open.

    "Holds" is read on `clock`, the ledger's (it stamped the start's `leased_until`); with
    none (an item handed over without a lease) nothing is waited for."""
    for retry in range(START_WAIT.attempts + 1):
        start = next((i for i in record.outbox if _role(i.payload) == START and i.open), None)
        if start is None:
            return record
        until = start.leased_until
        held = clock is not None and until is not None and until > clock()
        if not held or retry == START_WAIT.attempts:
            break
        _sleep(START_WAIT.delay(retry))
        record = services.ledger.operations.get(record.name) or record
    raise StartStillOpen(
        f"{record.name}: check run completion waits for its in_progress item to close"
    )


def left_to_newer(
    what: str, record: Operation, services: DeliveryServices, item: OutboxItem
) -> bool:
    """True (logged) when the push's current operation is not `record`'s: an older
    generation's item, however late, is done without a write (docs, "Re-run")."""
    shown_by = _shown_by(record, services)
    if shown_by == record.name:
        return False
    api.log_event(
        log,
        logging.INFO,
        f"{what} left to a newer generation",
        operation=record.name,
        current=shown_by,
        repo=record.context.get("repo"),
        sha=record.context.get("sha"),
        idempotency_key=item.idempotency_key,
    )
    return True


def shown_by(record: Operation, services: DeliveryServices) -> str | None:
    """The operation the push's check run and comment show now (`_shown_by`)."""
    return _shown_by(record, services)


def _shown_by(record: Operation, services: DeliveryServices) -> str | None:
    """The operation the push's check run shows now: its submission's current one (the
    record's own when it names no submission, or the submission expired)."""
    tag = record.context.get(CHECK_SUBMISSION) or record.submission
    stored = services.ledger.submissions.get(tag) if isinstance(tag, str) and tag else None
    current = stored.current_operation if stored is not None else None
    return current or record.name


def _role(payload: Any) -> str | None:
    if isinstance(payload, Mapping) and payload.get("kind") == CHECK_RUN:
        role = payload.get("role")
        return role if isinstance(role, str) else None
    return None


def _cancelled(record: Operation) -> str | None:
    """Why the review will not finish, when its batch was cancelled; else None."""
    if record.status != "cancelled":
        return None
    error = record.error if isinstance(record.error, Mapping) else {}
    return str(error.get("message") or "the review's batch was cancelled")


def _logged(what: str, shown: Any, operation: str, repo: str, sha: str, item: OutboxItem) -> None:
    api.log_event(
        log,
        logging.INFO,
        what,
        operation=operation,
        repo=repo,
        sha=sha,
        check_run_id=shown.check_run_id,
        created=shown.created,
        annotations_sent=shown.annotations_sent,
        writes=shown.writes,
        duplicates=list(shown.duplicates),
        idempotency_key=item.idempotency_key,
    )
