"""Gemini batch jobs through the real google-genai client.

What the SDK does not do for us, and this module does:
- a failed batch's top-level `error` is not copied by the SDK: read the raw JSON;
- a batch can report SUCCEEDED with every row failed: rows are returned one by one;
- results come inline or as a JSONL file (`dest.file_name`): both are read, the file
  streamed row by row (shared/gemini/rows.py); a status says whether its rows are
  complete, and nothing may settle a succeeded batch whose rows are not;
- inline requests must stay under 20 MB: above that the requests go as an uploaded file;
- creating a batch is not idempotent: callers tag `display_name` (shared/kinds.py);
- every batch carries that tag back in its events: `webhook_config.user_metadata`
  `{"hookledger_id": tag}`, with `uris` (the ingress's /gemini) when configured.

The one private SDK call (a resource's raw JSON) lives in shared/gemini/raw.py; the error
tree (GeminiError → GeminiUnavailable | GeminiNotFound | GeminiRejected, with
GeminiRateLimited and GeminiRowsUnread) and the SDK-error mapping in shared/gemini/errors.py;
what a create sends (inline requests, job config, `HOOKLEDGER_ID`) in
shared/gemini/requests.py; what a fetch returns (`BatchStatus`, `BatchStats`,
`BatchSummary`) and the readers of Gemini's answers in shared/gemini/batches.py. Those
names are re-exported here.
"""

from __future__ import annotations

import functools
import json
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from google import genai
from google.genai import types

from shared import logs, tracing
from shared.gemini.batches import BatchStats as BatchStats  # re-exported
from shared.gemini.batches import (
    BatchStatus,
    BatchSummary,
    batch_name,
    completion_stats,
    inline_rows,
    interaction_error,
    raw_batch_stats,
    safety_filtered,
)
from shared.gemini.errors import (
    GeminiError,
    GeminiNotFound,
    GeminiRefusedDeployment,
    GeminiRejected,
    GeminiUnavailable,
    mapped,
)
from shared.gemini.raw import (
    DEFAULT_PRIORITY,
    batch_job,
    checked_priority,
    get_body,
    refuses_priority,
)
from shared.gemini.requests import HOOKLEDGER_ID as HOOKLEDGER_ID  # re-exported
from shared.gemini.requests import create_config, inline_requests
from shared.gemini.rows import (
    MAX_INLINE_BYTES,
    Row,
    RowReader,
    file_line,
    inline_bytes,
)
from shared.gemini.states import (
    TERMINAL,
    meaning_of,
)
from shared.retry import RETRYABLE_STATUSES, RetryPolicy
from shared.statuses import OperationStatus

T = TypeVar("T")

log = logs.get_logger("gemini")


# Gemini's "Rate limits" guide: a 429 carries `RetryInfo.retryDelay`, honoured by deferring
# the operation (GeminiRateLimited.defer_s): the SDK's main client ignores that delay, and
# its Interactions client sleeps a `Retry-After` header as long as it says (google-genai
# `_gaos/utils/retries.py`), past any deadline of ours (docs/gemini-coverage.md, "Errors").
# So the SDK never retries these itself.
RATE_LIMITS_DEFERRED = frozenset({429})
# The shared policy (shared/retry.py), with the rule above; its backoff sets the SDK's.
GEMINI_POLICY = RetryPolicy(statuses=RETRYABLE_STATUSES - RATE_LIMITS_DEFERRED)
# What the SDK itself may retry inside one call: 408 and the 5xx, never 429.
SDK_RETRIED_STATUSES = tuple(sorted(GEMINI_POLICY.statuses))
SDK_INITIAL_DELAY_S = GEMINI_POLICY.backoff.first_s
SDK_MAX_DELAY_S = GEMINI_POLICY.backoff.cap_s
# The SDK adds its jitter in seconds (`+ jitter · random()`); ours is a fraction of the wait.
SDK_JITTER_S = GEMINI_POLICY.backoff.first_s * GEMINI_POLICY.backoff.jitter


def sdk_retry_options(
    timeout_s: float,
    deadline_s: float | None = None,
    attempts: int = GEMINI_POLICY.attempts,
    max_delay_s: float = SDK_MAX_DELAY_S,
) -> types.HttpRetryOptions:
    """The SDK's retry options for calls of `timeout_s` each that must end by `deadline_s`.

    The bound (google-genai: each wait is `min(initial · 2^n + jitter, max_delay)`, both
    clients): `n · timeout_s + (n − 1) · max_delay ≤ deadline_s`. The attempts `n` and
    the cap on each wait are cut until that holds; one attempt is always made (its own
    timeout is the caller's). No deadline: `attempts` and `max_delay_s` as given.
    """
    n = max(1, attempts)
    delay = max_delay_s
    if deadline_s is not None:
        while n > 1 and n * timeout_s > deadline_s:
            n -= 1
        if n > 1:
            delay = min(max_delay_s, (deadline_s - n * timeout_s) / (n - 1))
    return types.HttpRetryOptions(
        attempts=n,
        initial_delay=min(SDK_INITIAL_DELAY_S, delay),
        max_delay=delay,
        jitter=min(SDK_JITTER_S, delay),
        http_status_codes=list(SDK_RETRIED_STATUSES),
    )


def make_client(
    api_key: str,
    base_url: str = "",
    timeout_s: float = 30.0,
    attempts: int = 3,
    deadline_s: float | None = None,
) -> genai.Client:
    """A google-genai client with a per-call timeout and the SDK's own retries bounded so
    that one call, every attempt and wait included, ends by `deadline_s`
    (`sdk_retry_options`); never retrying a 429."""
    options = types.HttpOptions(
        base_url=base_url or None,
        timeout=int(timeout_s * 1000),  # the SDK takes milliseconds
        retry_options=sdk_retry_options(timeout_s, deadline_s, attempts),
    )
    return genai.Client(api_key=api_key or "unset", http_options=options)


def _priority_refused(exc: GeminiRejected) -> bool:
    """A 400 about `batch.priority` alone: not the deployment's refusal, no request named."""
    return (
        exc.status == 400
        and not isinstance(exc, GeminiRefusedDeployment)
        and not exc.request_indices
        and refuses_priority(str(exc))
    )


def _traced(span_name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Run a gateway method taking an operation `name` first inside a span naming it."""

    def decorate(method: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(method)
        def traced(self: Any, name: str, *args: Any, **kwargs: Any) -> T:
            with tracing.span(span_name, operation=name):
                return method(self, name, *args, **kwargs)

        return traced

    return decorate


class GeminiGateway:
    """The few Gemini calls hookledger makes, with errors mapped to the tree above."""

    def __init__(self, client: genai.Client, webhook_uris: Sequence[str] = ()) -> None:
        self._client = client
        # Per-job webhook URIs (GEMINI_WEBHOOK_URIS); empty: the registered webhooks.
        self._webhook_uris = list(webhook_uris)

    def create_batch(
        self,
        model: str,
        requests: Sequence[tuple[str, str]],
        display_name: str,
        *,
        generation_config: Mapping[str, Any] | None = None,
        priority: int = DEFAULT_PRIORITY,
    ) -> str:
        """Create a batch with one request per (key, prompt); returns its name.

        `generation_config` (the REST `generationConfig`, e.g. `responseMimeType` and
        `responseSchema` for structured output) goes with every request, the same inline
        and in a file. Inline when the create request stays under MAX_INLINE_BYTES, else
        the requests are uploaded as a JSONL file first (`upload_requests`) and the batch
        reads that.
        The job's `webhook_config` carries `{HOOKLEDGER_ID: display_name}` as user metadata
        (echoed in each of its events) and the gateway's webhook URIs, if any.
        `priority`: Gemini's `batch.priority` (int64; higher is processed first; 0, the
        default, is sent as nothing). A priority Gemini refuses with a 400 naming it (an
        API version that does not know the field) is dropped: the batch is created again
        without it, with a WARNING, since a 400 created nothing. A priority outside int64
        is a `ValueError` before anything is sent.
        """
        priority = checked_priority(priority)
        with tracing.span(
            "gemini.batches.create", display_name=display_name, model=model, requests=len(requests)
        ) as span:
            src = self._source(requests, display_name, generation_config)
            try:
                job = self._create(model, src, display_name, priority)
            except GeminiRejected as exc:
                if priority == DEFAULT_PRIORITY or not _priority_refused(exc):
                    raise
                logs.event(
                    log,
                    logging.WARNING,
                    "Gemini refused the batch's priority; creating it without one",
                    display_name=display_name,
                    priority=priority,
                    reason=str(exc),
                )
                job = self._create(model, src, display_name, DEFAULT_PRIORITY)
            if priority != DEFAULT_PRIORITY:
                span.set(priority=priority)
            if not job.name:
                raise GeminiRejected(f"create batch {display_name}: Gemini returned no name")
            span.set(operation=job.name)
        return job.name

    def _create(
        self, model: str, src: list[types.InlinedRequest] | str, display_name: str, priority: int
    ) -> types.BatchJob:
        config = create_config(display_name, self._webhook_uris, priority)
        with mapped(f"create batch {display_name}"):
            return self._client.batches.create(model=model, src=src, config=config)

    def _source(
        self,
        requests: Sequence[tuple[str, str]],
        display_name: str,
        generation_config: Mapping[str, Any] | None,
    ) -> list[types.InlinedRequest] | str:
        """The batch's `src`: the requests inline while small enough, else an uploaded file."""
        if inline_bytes(requests, generation_config) > MAX_INLINE_BYTES:
            return self.upload_requests(requests, display_name, generation_config)
        return inline_requests(requests, generation_config)

    def upload_requests(
        self,
        requests: Sequence[tuple[str, str]],
        display_name: str,
        generation_config: Mapping[str, Any] | None = None,
    ) -> str:
        """Upload `requests` (each with `generation_config`, when given) as a batch input
        file (JSONL); returns the file's name.

        The lines are spooled to a temporary file (on Cloud Functions /tmp is memory, so
        this costs the file's size once) and sent in the SDK's resumable 8 MiB chunks.
        A repeated upload only leaves an unused file, which Gemini deletes after 48 h.
        """
        with (
            tracing.span("gemini.files.upload", display_name=display_name),
            tempfile.TemporaryFile() as spool,
        ):
            for key, prompt in requests:
                spool.write(file_line(key, prompt, generation_config))
            spool.seek(0)
            with mapped(f"upload the requests of {display_name}"):
                uploaded = self._client.files.upload(
                    file=spool,
                    # The docs' sample uploads batch input with mime_type "jsonl".
                    config=types.UploadFileConfig(
                        display_name=f"{display_name} requests"[:512], mime_type="jsonl"
                    ),
                )
        if not uploaded.name:
            raise GeminiRejected(f"upload the requests of {display_name}: no file name returned")
        logs.event(
            log,
            logging.INFO,
            "batch requests uploaded as a file",
            file=uploaded.name,
            display_name=display_name,
            requests=len(requests),
        )
        return uploaded.name

    @_traced("gemini.batches.cancel")
    def cancel_batch(self, name: str) -> None:
        """Cancel the batch; one already finished (FAILED_PRECONDITION) or gone is done too.

        Gemini's cancel is asynchronous: the batch reports CANCELLED some time later.
        """
        name = batch_name(name)
        try:
            with mapped(f"cancel {name}"):
                self._client.batches.cancel(name=name)
        except GeminiNotFound:
            return  # deleted or aged out: nothing left to bill
        except GeminiRejected:
            with mapped(name):
                job = self._client.batches.get(name=name)
            if job.state is None or meaning_of(job.state.value).kind != TERMINAL:
                raise
        logs.event(log, logging.INFO, f"cancel requested for batch {name}", operation=name)

    @_traced("gemini.batches.get")
    def fetch_batch(self, name: str) -> BatchStatus:
        """The batch's state and, once terminal, its rows and top-level error: one GET.

        Rows come from the inlined responses or, streamed, from the results file. When
        they cannot all be read, the status says why in `rows_unread` (and the reason is
        logged naming the batch and the file); nothing is raised for it.
        """
        name = batch_name(name)
        # One read gives the typed job and what the SDK drops from it (`error`, `batchStats`).
        body = self._raw(name)
        try:
            job = batch_job(body)
        except ValueError as exc:
            raise GeminiUnavailable(f"{name}: Gemini answered a batch the SDK cannot read") from exc
        state = job.state.value if job.state is not None else "JOB_STATE_UNSPECIFIED"
        meaning = meaning_of(state)
        status = meaning.status if meaning.kind == TERMINAL else None
        error = None
        stats = completion_stats(job)
        if status is not None and status != OperationStatus.SUCCEEDED:  # ended unsuccessfully
            error = body.get("error") if isinstance(body.get("error"), dict) else None
        elif status == OperationStatus.SUCCEEDED and stats is None:
            stats = raw_batch_stats(body.get("metadata"))  # best effort: a cross-check
        rows, unread = self._rows(name, job, status)
        return BatchStatus(
            name=name,
            state=state,
            display_name=job.display_name or "",
            error=error,
            rows=rows,
            rows_unread=unread,
            ended_at=job.end_time,
            stats=stats,
        )

    def _rows(
        self, name: str, job: types.BatchJob, status: str | None
    ) -> tuple[tuple[Row, ...], str | None]:
        """(rows, why they are incomplete or None) for one fetched batch."""
        dest = job.dest
        if dest is not None and dest.inlined_responses:
            return inline_rows(dest.inlined_responses), None
        if dest is not None and dest.file_name:
            try:
                return self.read_results_file(name, dest.file_name), None
            except GeminiError as exc:
                logs.event(
                    log,
                    logging.ERROR,
                    f"results file of {name} could not be read",
                    operation=name,
                    file=dest.file_name,
                    reason=str(exc),
                )
                return (), f"results file {dest.file_name}: {exc}"
        if status == OperationStatus.SUCCEEDED:
            return (), "Gemini reports it succeeded but shows no results yet"
        return (), None

    @_traced("gemini.files.download")
    def read_results_file(self, name: str, file_name: str) -> tuple[Row, ...]:
        """Every row of batch `name`'s results file, streamed (memory: a chunk and a row)."""
        reader = RowReader(file_name)
        with mapped(f"{name}: download {file_name}"):
            self._client.files.download(file=file_name, destination=reader)
        return reader.rows()

    def list_batches(self, page_size: int = 100) -> Iterator[BatchSummary]:
        """Every batch, all pages (states and names only: the list carries no results)."""
        with mapped("list batches"):
            for job in self._client.batches.list(config={"page_size": page_size}):
                state = job.state.value if job.state is not None else ""
                yield BatchSummary(job.name or "", job.display_name or "", state, job.create_time)

    def fetch(self, name: str) -> BatchStatus:
        """Any long-running operation: a batch (`batches/…` or a bare id), an interaction
        (`interactions/…`) or another one (`models/…/operations/…`: video generation,
        file-search import)."""
        if name.startswith("interactions/"):
            return self._fetch_interaction(name)
        if "/operations/" not in name:
            return self.fetch_batch(name)
        # The SDK's operations API wants a typed operation object; the REST shape is generic.
        with tracing.span("gemini.operations.get", operation=name):
            body = self._raw(name)
        if not body.get("done"):
            return BatchStatus(name=name, state="JOB_STATE_RUNNING")
        error = body.get("error")
        if isinstance(error, dict):
            state = "JOB_STATE_CANCELLED" if error.get("code") == 1 else "JOB_STATE_FAILED"
            return BatchStatus(name=name, state=state, error=error)
        filtered = safety_filtered(body.get("response"))
        if filtered is not None:
            return BatchStatus(name=name, state="JOB_STATE_FAILED", error=filtered)
        return BatchStatus(name=name, state="JOB_STATE_SUCCEEDED")

    @_traced("gemini.interactions.get")
    def _fetch_interaction(self, name: str) -> BatchStatus:
        """An interaction by its Interactions API `status`, read through the SDK's public
        `client.interactions.get`: `state` is that status (shared/gemini/states.py). Once
        it completed (`completed`, `incomplete`), its output is one row keyed by `name`,
        the text the SDK gathers from the last model output (`output_text`); error text
        comes from its `errors[]`."""
        interaction_id = name.removeprefix("interactions/")
        with mapped(name):
            interaction = self._client.interactions.get(id=interaction_id)
        body = interaction.model_dump(mode="json", exclude_none=True)
        state = str(body.get("status") or "")
        meaning = meaning_of(state)
        status = meaning.status if meaning.kind == TERMINAL else None
        error = None
        rows: tuple[Row, ...] = ()
        if status is not None and status != OperationStatus.SUCCEEDED:  # ended unsuccessfully
            error = interaction_error(body) or {"message": f"interaction ended {state}"}
        elif status == OperationStatus.SUCCEEDED:
            rows = (Row(key=name, text=str(body.get("output_text") or "")),)
        return BatchStatus(name=name, state=state, error=error, rows=rows)

    def _raw(self, name: str) -> dict[str, Any]:
        """The resource as Gemini sent it, through the SDK's own transport (auth, timeout)."""
        with mapped(name):
            text = get_body(self._client, name)
        try:
            body = json.loads(text or "{}")
        except ValueError as exc:
            raise GeminiUnavailable(f"{name}: Gemini answered something that is not JSON") from exc
        return body if isinstance(body, dict) else {}
