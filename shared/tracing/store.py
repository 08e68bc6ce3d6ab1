"""The local span store: JSON lines under `TRACE_DIR` (`.local/traces` for `make run`).

Each traced process appends to its own file, `<service>-<pid>.jsonl`, one span a line,
so processes never interleave a write. A line (what the console reads, `read_spans`):

    {"trace_id": 32 hex, "span_id": 16 hex, "parent_id": 16 hex | null,
     "name": "worker.attempt", "service": "hookledger-worker", "kind": "server",
     "start_ns": unix ns, "end_ns": unix ns, "status": "ok" | "error" | "unset",
     "error": text | null, "attributes": {...},
     "links": [{"trace_id": …, "span_id": …}], "sampled": bool}

The reader needs nothing of OpenTelemetry (the console imports it); the writer gets
the SDK's finished spans from shared/tracing/otel.py.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A span whose end is this far past its trace's first start is still drawn, but a line
# longer than this is not read back (a torn write, or not ours).
MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True)
class StoredSpan:
    """One finished span as the store keeps it (module docstring)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    service: str
    kind: str
    start_ns: int
    end_ns: int
    status: str
    error: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    links: tuple[tuple[str, str], ...] = ()
    sampled: bool = True

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6

    def to_json(self) -> str:
        return json.dumps(
            {
                "trace_id": self.trace_id,
                "span_id": self.span_id,
                "parent_id": self.parent_id,
                "name": self.name,
                "service": self.service,
                "kind": self.kind,
                "start_ns": self.start_ns,
                "end_ns": self.end_ns,
                "status": self.status,
                "error": self.error,
                "attributes": dict(self.attributes),
                "links": [{"trace_id": t, "span_id": s} for t, s in self.links],
                "sampled": self.sampled,
            },
            separators=(",", ":"),
            default=str,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredSpan:
        """Raises KeyError, TypeError or ValueError for a line that is not a span."""
        links = tuple(
            (str(link["trace_id"]), str(link["span_id"])) for link in data.get("links") or ()
        )
        return cls(
            trace_id=str(data["trace_id"]),
            span_id=str(data["span_id"]),
            parent_id=data.get("parent_id"),
            name=str(data["name"]),
            service=str(data.get("service", "")),
            kind=str(data.get("kind", "internal")),
            start_ns=int(data["start_ns"]),
            end_ns=int(data["end_ns"]),
            status=str(data.get("status", "unset")),
            error=data.get("error"),
            attributes=dict(data.get("attributes") or {}),
            links=links,
            sampled=bool(data.get("sampled", True)),
        )


class SpanFileWriter:
    """Appends finished spans to `directory/<service>-<pid>.jsonl` (a `Sink` of otel.py)."""

    def __init__(self, directory: str | os.PathLike[str], service: str) -> None:
        self.directory = Path(directory)
        self.service = service
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        # The pid is read per write: a forked server process gets its own file.
        return self.directory / f"{self.service}-{os.getpid()}.jsonl"

    def export(self, spans: Sequence[Any]) -> None:
        lines = "".join(from_sdk(span).to_json() + "\n" for span in spans)
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(lines)

    def flush(self) -> None:
        return None  # every export is written before it returns


def from_sdk(span: Any) -> StoredSpan:
    """A `StoredSpan` of an OpenTelemetry SDK `ReadableSpan`."""
    context = span.context
    parent = span.parent
    status = span.status.status_code.name.lower()
    resource = span.resource.attributes if span.resource is not None else {}
    return StoredSpan(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_id=f"{parent.span_id:016x}" if parent is not None else None,
        name=span.name,
        service=str(resource.get("service.name", "")),
        kind=span.kind.name.lower(),
        start_ns=int(span.start_time or 0),
        end_ns=int(span.end_time or span.start_time or 0),
        status=status,
        error=span.status.description if status == "error" else None,
        attributes=dict(span.attributes or {}),
        links=tuple(
            (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in span.links
        ),
        sampled=bool(context.trace_flags.sampled),
    )


def read_spans(
    directory: str | os.PathLike[str], trace_ids: Iterable[str] | None = None
) -> list[StoredSpan]:
    """Every stored span (of `trace_ids`, when given), ordered by start; unreadable lines
    (a write torn by a kill) are skipped."""
    wanted = set(trace_ids) if trace_ids is not None else None
    spans = [
        span for span in _all_spans(Path(directory)) if wanted is None or span.trace_id in wanted
    ]
    return sorted(spans, key=lambda span: (span.start_ns, span.end_ns))


def traces_with(directory: str | os.PathLike[str], **attributes: Any) -> list[str]:
    """The ids of the traces holding a span with these `hookledger.` attributes, oldest
    first (e.g. `delivery_id="…"`)."""
    wanted = {f"hookledger.{name}": value for name, value in attributes.items()}
    found: dict[str, int] = {}
    for span in _all_spans(Path(directory)):
        if all(span.attributes.get(key) == value for key, value in wanted.items()):
            found[span.trace_id] = min(found.get(span.trace_id, span.start_ns), span.start_ns)
    return sorted(found, key=found.__getitem__)


def prune(directory: str | os.PathLike[str], older_than_s: float, now: float) -> int:
    """Remove our span files (`hookledger-<function>-<pid>.jsonl`) last written more than
    `older_than_s` before `now` (epoch seconds), so a long-lived local store stays small;
    how many were removed."""
    removed = 0
    for path in Path(directory).glob("hookledger-*.jsonl"):  # ours only, wherever it points
        try:
            if now - path.stat().st_mtime > older_than_s:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # another process pruned it first
    return removed


def _all_spans(directory: Path) -> Iterator[StoredSpan]:
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.jsonl")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # removed while listing
        for line in text.splitlines():
            if not line or len(line) > MAX_LINE_BYTES:
                continue
            try:
                yield StoredSpan.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
