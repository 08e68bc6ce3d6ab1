"""One trace per push, across the Cloud Tasks hop (docs/architecture.md, "Tracing").

The API every path calls; it imports nothing of OpenTelemetry, so with tracing off
(`TRACING=off`, the default) a span costs one function call and no import:

    configure(config)            once per process (shared.entrypoints.runtime.check_startup): loads
                                 OpenTelemetry (shared/tracing/otel.py) only when on
    span(name, *, parent=, links=, kind=, **attributes) -> context manager of a `Span`
                                 a child of the current span, or of `parent` (a W3C
                                 traceparent string, e.g. from a task's envelope)
    server_span(name, headers)   a request's span, the child of its `traceparent` header
    span_in(home, name)          a span in the trace of a stored traceparent (a settlement
                                 in its push's trace, linked to the push)
    traceparent()                the current span as a W3C traceparent, or None
    run_traceparent()            the span of the run being served (a request, a check)
    with_traceparent(headers)    `headers` plus the current span's traceparent
    carry(fn)                    `fn` run in the current span's context on another thread

`TRACING` chooses where finished spans go: `cloudtrace` (the Cloud Trace exporter, in
production), `file` (JSON lines under `TRACE_DIR`, what `make run` and the console read:
shared/tracing/store.py), or `off`. `TRACE_SAMPLE_RATIO` keeps that share of traces,
decided on the trace id so every function keeps the same ones; a run (a request, an
attempt, a check) that ends with an error or marks `keep` (a dead delivery) keeps its own
spans whatever the ratio: that function's part of the trace, not the others'.

Attribute names without a dot are ours and get the `hookledger.` prefix
(`delivery_id=` is `hookledger.delivery_id`); dotted names (`http.response.status_code`)
are OpenTelemetry's and are kept as given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from shared import logs
from shared.tracing.traceparent import TRACEPARENT as TRACEPARENT
from shared.tracing.traceparent import parse_traceparent as parse_traceparent

if TYPE_CHECKING:
    from shared.config import Config

P = ParamSpec("P")
T = TypeVar("T")
# What `TRACING` may say (shared/config.py reads it): see the module docstring.
MODES = ("off", "file", "cloudtrace")


class Span(Protocol):
    """What a call site may do with its span."""

    def set(self, **attributes: Any) -> None: ...

    def fail(self, message: str) -> None:
        """Mark the span as an error (an exception leaving the span does it too)."""

    def keep(self) -> None:
        """Keep this span's trace whatever the sample ratio (a dead delivery)."""


class _Tracer(Protocol):
    def span(
        self,
        name: str,
        parent: str | None,
        links: Sequence[str],
        kind: str,
        attributes: Mapping[str, Any],
    ) -> AbstractContextManager[Span]: ...

    def traceparent(self) -> str | None: ...

    def run_traceparent(self) -> str | None: ...

    def log_fields(self) -> dict[str, Any]: ...

    def flush(self) -> None: ...

    def carry(self, fn: Callable[P, T]) -> Callable[P, T]: ...


class _NoSpan:
    """The span of a process with tracing off: every call does nothing."""

    def set(self, **attributes: Any) -> None:
        pass

    def fail(self, message: str) -> None:
        pass

    def keep(self) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()
_tracer: _Tracer | None = None


def configure(config: Config) -> None:
    """Start tracing for this process as `config` says (`TRACING`); off: nothing is loaded."""
    global _tracer
    if config.tracing == "off":
        _install(None)
        return
    from shared.tracing.otel import OtelTracer  # heavy: only a traced process pays

    _install(OtelTracer.from_config(config))


def _install(tracer: _Tracer | None) -> None:
    global _tracer
    previous, _tracer = _tracer, tracer
    if previous is not None:
        previous.flush()
    logs.trace_fields = tracer.log_fields if tracer is not None else None


def enabled() -> bool:
    return _tracer is not None


def span(
    name: str,
    *,
    parent: str | None = None,
    links: Sequence[str | None] = (),
    kind: str = "internal",
    **attributes: Any,
) -> AbstractContextManager[Span]:
    """A span named `name` around the `with` block (see the module docstring)."""
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    usable = [link for link in links if link and parse_traceparent(link) is not None]
    if parent is not None and parse_traceparent(parent) is None:
        parent = None  # an unreadable parent starts a new trace rather than failing the call
    return tracer.span(name, parent, usable, kind, attributes)


def server_span(
    name: str, headers: Mapping[str, str], **attributes: Any
) -> AbstractContextManager[Span]:
    """A request's span, continuing the caller's trace from its `traceparent` header."""
    if _tracer is None:
        return _NO_SPAN
    return span(name, parent=headers.get(TRACEPARENT), kind="server", **attributes)


def span_in(home: str | None, name: str, **attributes: Any) -> AbstractContextManager[Span]:
    """A span in the trace of `home` (a stored traceparent: the push that registered an
    operation), linked to `home`. When the current span is in another trace (a Gemini
    webhook's, a reconcile run's), it becomes a child of `home` linked to the current one,
    so a settlement hours later still sits in its push's trace; else a child as usual."""
    if _tracer is None:
        return _NO_SPAN
    current = _tracer.traceparent()
    home_trace = trace_id_of(home)
    if home is None or home_trace is None or trace_id_of(current) == home_trace:
        return span(name, links=[home], **attributes)
    return span(name, parent=home, links=[home, current], **attributes)


def traceparent() -> str | None:
    """The current span as a W3C traceparent (`00-<trace>-<span>-<flags>`), or None."""
    return _tracer.traceparent() if _tracer is not None else None


def run_traceparent() -> str | None:
    """The traceparent of the run being served (the request's or the check's span, not a
    commit's inside it): what an operation stores for its settlement to link back to."""
    return _tracer.run_traceparent() if _tracer is not None else None


def with_traceparent(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` plus the current span's `traceparent`, for a task Cloud Tasks forwards."""
    current = traceparent()
    return {**headers, TRACEPARENT: current} if current else dict(headers)


def carry(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn`, run in the current span's context on whichever thread calls it (a pool)."""
    return _tracer.carry(fn) if _tracer is not None else fn


def flush() -> None:
    """Export what is buffered (tests, and a process about to stop)."""
    if _tracer is not None:
        _tracer.flush()


def trace_id_of(value: str | None) -> str | None:
    """The trace id of a traceparent, or None."""
    parsed = parse_traceparent(value) if value else None
    return parsed[0] if parsed else None


@contextmanager
def installed(tracer: _Tracer | None) -> Iterator[None]:
    """Run the block with `tracer` in place of this process's (tests)."""
    previous = _tracer
    _install(tracer)
    try:
        yield
    finally:
        _install(previous)
