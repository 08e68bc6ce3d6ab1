"""OpenTelemetry behind shared/tracing/__init__.py: loaded only by a process that traces.

    sampler    keeps `TRACE_SAMPLE_RATIO` of traces, judged on the trace id (as the SDK's
               TraceIdRatioBased does), so the ingress, the worker and reconcile keep the
               same traces; the rest are recorded, not sampled, until their end is known
    TraceBuffer holds a local root's finished spans until that root ends, then
               exports them when the trace is sampled, or has an error, or a span asked
               to `keep` it (a dead delivery); else drops them
    OtelTracer the `_Tracer` shared/tracing calls: spans, traceparents, log fields

A span's error status comes from an exception leaving it (its type only: an exception's
message may quote what it failed on, a header, a token; OpenTelemetry would record it
whole) or from `fail`. Buffers are bounded: a root over `MAX_SPANS_PER_ROOT` keeps its
first spans, and past `MAX_OPEN_ROOTS` the oldest running root is forgotten.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.tracing.cloud import CloudTraceSink
from shared.tracing.store import SpanFileWriter
from shared.tracing.traceparent import TRACEPARENT, parse_traceparent

P = ParamSpec("P")
T = TypeVar("T")

if TYPE_CHECKING:
    from shared.config import Config

MAX_SPANS_PER_ROOT = 1000
MAX_OPEN_ROOTS = 1000
KEEP = "hookledger.keep"
_KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
_PROPAGATOR = TraceContextTextMapPropagator()
_TRACE_ID_LIMIT = (1 << 64) - 1
Export = Callable[[Sequence[ReadableSpan]], None]
# The traceparent of the run (a request's or a check's span) the current code serves.
_RUN: ContextVar[str | None] = ContextVar("hookledger_trace_run", default=None)


class Sink(Protocol):
    """Where kept traces go: shared/tracing/store.py (a file) or cloud.py (Cloud Trace)."""

    def export(self, spans: Sequence[ReadableSpan]) -> None: ...

    def flush(self) -> bool | None: ...


class RatioSampler(Sampler):
    """Samples `ratio` of trace ids; records the others so an error can still keep them."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        self._bound = round(ratio * (_TRACE_ID_LIMIT + 1))

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        sampled = trace_id & _TRACE_ID_LIMIT < self._bound
        decision = Decision.RECORD_AND_SAMPLE if sampled else Decision.RECORD_ONLY
        return SamplingResult(decision, attributes)

    def get_description(self) -> str:
        return f"hookledger.RatioSampler{{{self.ratio}}}"


class TraceBuffer(SpanProcessor):
    """Holds each local root's finished spans (a request's, an attempt's, a check's: a span
    whose parent is remote or absent) until that root ends, then exports them if the trace
    is worth keeping. Two roots of one trace in one process (a retry running beside the
    attempt it overlaps) are kept apart; a span that ends after its root is decided alone."""

    def __init__(self, export: Export) -> None:
        self._export = export
        self._lock = threading.Lock()
        self._root_of: dict[int, int] = {}  # span id → its local root's span id, while open
        self._open: OrderedDict[int, list[ReadableSpan]] = OrderedDict()  # by live root

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        context, parent = span.context, span.parent
        with self._lock:
            if parent is None or parent.is_remote:
                root = context.span_id
                self._open[root] = []
                if len(self._open) > MAX_OPEN_ROOTS:  # a root that never ended: forget it
                    stale, _ = self._open.popitem(last=False)
                    self._root_of = {k: v for k, v in self._root_of.items() if v != stale}
            else:
                root = self._root_of.get(parent.span_id, context.span_id)
            self._root_of[context.span_id] = root

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        with self._lock:
            root = self._root_of.pop(context.span_id, context.span_id)
            spans = self._open.get(root)
            if spans is not None and len(spans) < MAX_SPANS_PER_ROOT:
                spans.append(span)
            if spans is not None and root != context.span_id:
                return  # its root is still running: decided when it ends
            batch = self._open.pop(root, None) or [span]
        if context.trace_flags.sampled or any(_worth_keeping(s) for s in batch):
            self._export(batch)

    def shutdown(self) -> None:
        with self._lock:
            self._open.clear()
            self._root_of.clear()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _worth_keeping(span: ReadableSpan) -> bool:
    return span.status.status_code is StatusCode.ERROR or bool((span.attributes or {}).get(KEEP))


class _SpanHandle:
    """The `shared.tracing.Span` of one OpenTelemetry span."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, **attributes: Any) -> None:
        self._span.set_attributes(attribute_map(attributes))

    def fail(self, message: str) -> None:
        self._span.set_status(Status(StatusCode.ERROR, message[:500]))

    def keep(self) -> None:
        self._span.set_attribute(KEEP, True)


def attribute_map(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Our names prefixed (module docstring of shared/tracing); None dropped; other
    values that OpenTelemetry cannot hold written as text."""
    out: dict[str, Any] = {}
    for name, value in attributes.items():
        if value is None:
            continue
        key = name if "." in name else f"hookledger.{name}"
        out[key] = value if isinstance(value, str | bool | int | float) else str(value)
    return out


def span_context(traceparent: str) -> SpanContext | None:
    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return None
    trace_id, span_id, sampled = parsed
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=flags)


class OtelTracer:
    """Spans of one process (`service`), kept or dropped by a `TraceBuffer`, kept ones to `sink`."""

    def __init__(self, service: str, project: str, ratio: float, sink: Sink) -> None:
        self.project = project
        self.sink = sink
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": service}),
            sampler=RatioSampler(ratio),
        )
        self.provider.add_span_processor(TraceBuffer(sink.export))
        self._tracer = self.provider.get_tracer("hookledger")

    @classmethod
    def from_config(cls, config: Config) -> OtelTracer:
        service = f"hookledger-{config.function or 'tool'}"
        if config.tracing == "file":
            sink: Sink = SpanFileWriter(config.trace_dir, service)
        else:
            sink = CloudTraceSink(config.project)
        return cls(service, config.project, config.trace_sample_ratio, sink)

    @contextmanager
    def span(
        self,
        name: str,
        parent: str | None,
        links: Sequence[str],
        kind: str,
        attributes: Mapping[str, Any],
    ) -> Iterator[_SpanHandle]:
        context = None
        if parent is not None:
            context = _PROPAGATOR.extract({TRACEPARENT: parent})
        elif kind == "server":  # a request starts its own trace, whatever a reused thread held
            context = otel_context.Context()
        linked = [Link(ctx) for ctx in map(span_context, links) if ctx is not None]
        with self._tracer.start_as_current_span(
            name,
            context=context,
            kind=_KINDS.get(kind, SpanKind.INTERNAL),
            attributes=attribute_map(attributes),
            links=linked,
            record_exception=False,  # module docstring: the type, never the message
            set_status_on_exception=False,
        ) as current:
            run = parent is not None or kind == "server"  # a request's, an attempt's, a check's
            token = _RUN.set(self.traceparent()) if run else None
            try:
                yield _SpanHandle(current)
            except Exception as exc:
                current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise
            finally:
                if token is not None:
                    _RUN.reset(token)

    def run_traceparent(self) -> str | None:
        return _RUN.get() or self.traceparent()

    def traceparent(self) -> str | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=otel_context.get_current())
        return carrier.get(TRACEPARENT)

    def log_fields(self) -> dict[str, Any]:
        """`logging.googleapis.com/trace`, `/spanId` and `/trace_sampled` for the current span."""
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return {}
        return {
            "logging.googleapis.com/trace": (
                f"projects/{self.project}/traces/{context.trace_id:032x}"
            ),
            "logging.googleapis.com/spanId": f"{context.span_id:016x}",
            "logging.googleapis.com/trace_sampled": context.trace_flags.sampled,
        }

    def flush(self) -> None:
        self.sink.flush()

    def carry(self, fn: Callable[P, T]) -> Callable[P, T]:
        captured, run_span = otel_context.get_current(), _RUN.get()

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            token, run_token = otel_context.attach(captured), _RUN.set(run_span)
            try:
                return fn(*args, **kwargs)
            finally:
                _RUN.reset(run_token)
                otel_context.detach(token)

        return run
