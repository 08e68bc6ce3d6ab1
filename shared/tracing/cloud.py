"""Kept traces to Cloud Trace, with the exporter Google publishes.

The package is `opentelemetry-exporter-gcp-trace`.

Spans are written from one background thread, so no request waits for Cloud Trace: a
request only queues its trace (`CloudTraceSink.export`). The thread starts in the process
that exports (functions-framework configures tracing before its server forks), and builds
the exporter and its gRPC client on the first trace, off the cold start. Each
`BatchWriteSpans` call has `EXPORT_TIMEOUT_S`; a failed one is one WARNING naming the
cause and how many spans (never their content; the exporter's own ERROR line is
swallowed), and the spans are dropped: tracing never retries into a request's time. The
queue holds at most `MAX_QUEUED` traces; past it a trace is dropped, counted and said.

The package marks `CloudTraceSpanExporter` deprecated in favour of OTLP to
`telemetry.googleapis.com`; it is the exporter the Cloud Trace docs for Python still
show, and this module is the one place to change when moving.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from shared import logs

EXPORT_TIMEOUT_S = 10.0
MAX_QUEUED = 1000
FLUSH_TIMEOUT_S = 5.0
log = logs.get_logger("tracing")


class _TimedClient:
    """The Cloud Trace client as the exporter calls it, with a deadline on every call."""

    def __init__(self, client: Any, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s

    def batch_write_spans(self, request: Any = None, **kwargs: Any) -> Any:
        return self._client.batch_write_spans(request=request, timeout=self._timeout_s, **kwargs)


class _ExporterFailures(logging.Filter):
    """The exporter logs its own failures (an ERROR with a traceback, each time) and
    returns FAILURE: its line is swallowed here and its cause kept for our one WARNING."""

    def __init__(self) -> None:
        super().__init__()
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        self.last = f"{type(error).__name__}: {error}" if error else record.getMessage()
        return False


EXPORTER_LOGGER = "opentelemetry.exporter.cloud_trace"
_failures = _ExporterFailures()


def default_exporter(project: str) -> Any:
    """The published exporter for `project` on Cloud Trace's default client."""
    from google.cloud.trace_v2 import TraceServiceClient

    return published_exporter(project, TraceServiceClient())


def published_exporter(project: str, client: Any) -> Any:
    """`CloudTraceSpanExporter` on `client`, each call given a deadline, `service.name`
    (which function) exported as a label, its failure lines turned into our WARNING."""
    from opentelemetry.exporter.cloud_trace import CloudTraceSpanExporter

    logging.getLogger(EXPORTER_LOGGER).addFilter(_failures)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # module docstring
        return CloudTraceSpanExporter(
            project_id=project,
            client=_TimedClient(client, EXPORT_TIMEOUT_S),
            resource_regex=r"service\.name",
        )


class CloudTraceSink:
    """Queues kept traces and writes them to Cloud Trace from a daemon thread."""

    def __init__(self, project: str, exporter_factory: Any = None) -> None:
        self.project = project
        self._factory = exporter_factory or default_exporter
        self._exporter: Any = None
        self.dropped = 0
        self._pid = -1  # the process whose thread serves the queue: none yet
        self._start_lock = threading.Lock()
        atexit.register(self.flush)

    def _serving(self) -> None:
        """Start the export thread in this process, on its first trace. The functions'
        server imports `functions/main.py` (which configures tracing) before it forks its
        worker, and a thread does not survive a fork: the worker starts its own."""
        if self._pid == os.getpid():
            return
        with self._start_lock:
            if self._pid == os.getpid():
                return
            self._queue: queue.Queue[Sequence[Any]] = queue.Queue(maxsize=MAX_QUEUED)
            self._pending = 0
            self._idle = threading.Condition()
            name = "cloud-trace-export"
            threading.Thread(target=self._run, args=(self._queue,), name=name, daemon=True).start()
            self._pid = os.getpid()

    def export(self, spans: Sequence[Any]) -> None:
        self._serving()
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(list(spans))
        except queue.Full:
            with self._idle:
                self._pending -= 1
                self.dropped += 1
                dropped = self.dropped
            if dropped == 1 or dropped % 100 == 0:  # said, without a line per trace
                logs.event(
                    log,
                    logging.WARNING,
                    f"Cloud Trace export queue full: {dropped} traces dropped so far",
                    project=self.project,
                    dropped=dropped,
                )

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait until every queued trace is written (or failed); False on timeout."""
        if self._pid != os.getpid():
            return True  # nothing was queued in this process
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout_s)

    def _run(self, pending: queue.Queue[Sequence[Any]]) -> None:
        while True:
            spans = pending.get()
            try:
                self._write(spans)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _write(self, spans: Sequence[Any]) -> None:
        _failures.last = None
        try:
            if self._exporter is None:
                self._exporter = self._factory(self.project)
            result = self._exporter.export(spans)
        except Exception as exc:
            result, reason = None, f"{type(exc).__name__}: {exc}"
        else:
            reason = _failures.last or "the exporter reported a failure"
        if result is None or getattr(result, "name", "") != "SUCCESS":
            logs.event(
                log,
                logging.WARNING,
                f"Cloud Trace export failed for {len(spans)} spans of project {self.project}",
                project=self.project,
                spans=len(spans),
                reason=reason[:300],
            )
