"""The "Trace" section of the delivery and operation pages, read from the local span store.

The store (`TRACE_DIR`, shared/tracing/store.py) is what `make run` writes; it is read
whole on each such page, which suits a local run's few files. Outside a `demo-` project
each trace id also links to Cloud Trace, where production spans go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from hookledger.console.waterfall import waterfall
from shared.config import Config
from shared.ledger import Operation
from shared.tracing import trace_id_of
from shared.tracing.store import StoredSpan, read_spans, traces_with

TRACES_SHOWN = 3  # the newest; a delivery has one trace, and one more per replay
CLOUD_TRACE = "https://console.cloud.google.com/traces/list"


@dataclass(frozen=True)
class TraceSettings:
    directory: str
    project: str

    @classmethod
    def from_config(cls, config: Config) -> TraceSettings:
        return cls(config.trace_dir, config.project)

    def cloud_trace_url(self, trace_id: str) -> str | None:
        """Cloud Trace's page of `trace_id`; None for a local (`demo-`) project."""
        if self.project.startswith("demo-"):
            return None
        return f"{CLOUD_TRACE}?{urlencode({'project': self.project, 'tid': trace_id})}"


@dataclass(frozen=True)
class Drawn:
    """One trace of the section: its waterfall (None when no span of it is stored)."""

    trace_id: str
    spans: int
    svg: str | None
    url: str | None


@dataclass(frozen=True)
class Section:
    directory: str
    traces: list[Drawn] = field(default_factory=list)
    more: int = 0  # traces found beyond TRACES_SHOWN

    @property
    def drawn(self) -> bool:
        return any(trace.svg for trace in self.traces)


def for_delivery(settings: TraceSettings, delivery_id: str) -> Section:
    """The newest traces holding a span of this delivery (`hookledger.delivery_id`)."""
    found = traces_with(settings.directory, delivery_id=delivery_id)
    return _section(settings, found[-TRACES_SHOWN:], len(found))


def for_operation(settings: TraceSettings, operation: Operation) -> Section:
    """The trace that registered `operation` (`Operation.trace`; its checks, settlement and
    deliveries join it), then any other trace with a span naming it (`hookledger.operation`),
    which is all of them when it was registered untraced."""
    own = trace_id_of(operation.trace)
    named = traces_with(settings.directory, operation=operation.name)
    found = list(dict.fromkeys([own, *named] if own else named))
    return _section(settings, found[:TRACES_SHOWN], len(found))


def _section(settings: TraceSettings, shown: list[str], found: int) -> Section:
    by_trace: dict[str, list[StoredSpan]] = {trace_id: [] for trace_id in shown}
    for span in read_spans(settings.directory, shown) if shown else []:
        by_trace[span.trace_id].append(span)
    traces = [
        Drawn(
            trace_id=trace_id,
            spans=len(of_trace),
            svg=waterfall(of_trace, element_id=f"waterfall-{trace_id}") if of_trace else None,
            url=settings.cloud_trace_url(trace_id),
        )
        for trace_id, of_trace in by_trace.items()
    ]
    return Section(settings.directory, traces, found - len(shown))
