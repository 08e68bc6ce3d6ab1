"""A trace's waterfall as inline SVG: one row per span, on a time axis broken at long gaps.

`layout(spans)` orders the rows (children under their parent, siblings by start; a span
whose parent is not in `spans` is a root) and cuts the axis into segments; `render`
draws them. The markup holds only escaped text and numbers, so a template may mark it
safe. Readable without colour: an error bar is hatched and its row says "error".

A gap in the activity (no span running) at least `GAP_MIN_NS` long and at least
`GAP_SHARE` of the busy time is drawn as a fixed-width break labelled with its length,
so a reconcile check minutes after the worker run does not squeeze every bar to a pixel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise
from typing import Any

from shared.tracing.store import StoredSpan

MAX_SPANS = 300
GAP_MIN_NS = 1_000_000_000
GAP_SHARE = 0.5

WIDTH = 1160
NAME_W, DUR_W = 300, 76
PLOT_X0 = NAME_W + DUR_W + 12
PLOT_X1 = WIDTH - 12
ROW_H, BAR_H, INDENT = 32, 14, 14
BREAK_W, MIN_SEGMENT_W = 64, 40
LANE_H = 16
CHAR_W = 6.2  # average width of an 11 px sans-serif character, to keep notes inside
NOTE_CHARS, TITLE_VALUE_CHARS, NAME_CHARS = 90, 120, 38

# OpenTelemetry leaves a span that did not fail `unset` (our code never sets `ok`): both
# are drawn as done; only an error stands out.
_FILL = {"ok": "#2563eb", "error": "url(#wf-error)", "unset": "#2563eb"}
_DEFS = (
    "<defs>"
    '<pattern id="wf-error" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fecaca"/>'
    '<line x1="0" y1="0" x2="0" y2="6" stroke="#b91c1c" stroke-width="3"/></pattern>'
    "</defs>"
)


@dataclass(frozen=True)
class Row:
    span: StoredSpan
    depth: int


@dataclass(frozen=True)
class Segment:
    """A stretch of the axis drawn to scale: [start_ns, end_ns] at [x0, x1]."""

    start_ns: int
    end_ns: int
    x0: float
    x1: float

    def x(self, t_ns: int) -> float:
        if self.end_ns == self.start_ns:
            return self.x0
        return self.x0 + (self.x1 - self.x0) * (t_ns - self.start_ns) / (
            self.end_ns - self.start_ns
        )


@dataclass(frozen=True)
class Gap:
    """A break in the axis: nothing ran from `start_ns` until `end_ns`, when `next_name` began."""

    start_ns: int
    end_ns: int
    next_name: str
    x0: float
    x1: float

    @property
    def label(self) -> str:
        return f"⋯ {duration(self.end_ns - self.start_ns)} until {self.next_name}"


@dataclass(frozen=True)
class Layout:
    rows: list[Row]
    segments: list[Segment]
    gaps: list[Gap]
    total: int  # spans given; more than len(rows) when capped

    @property
    def start_ns(self) -> int:
        return self.segments[0].start_ns if self.segments else 0

    def x(self, t_ns: int) -> float:
        for segment in self.segments:
            if t_ns <= segment.end_ns:
                return segment.x(max(t_ns, segment.start_ns))
        return self.segments[-1].x1


def duration(ns: int) -> str:
    """ms below a second, s below a minute, then min and s (h and min past an hour)."""
    ms = max(0, ns) / 1e6
    if ms < 1000:
        return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def layout(spans: Sequence[StoredSpan], max_spans: int = MAX_SPANS) -> Layout:
    """Rows in tree order and the axis of at most `max_spans` spans (the earliest)."""
    # A span stored twice (an export retried) gets one row: its first.
    unique = list({span.span_id: span for span in reversed(spans)}.values())
    kept = sorted(unique, key=_by_start)[:max_spans]
    return Layout(_tree_rows(kept), *_axis(kept), total=len(unique))


def _by_start(span: StoredSpan) -> tuple[int, int, str]:
    return span.start_ns, span.end_ns, span.name


def _tree_rows(spans: list[StoredSpan]) -> list[Row]:
    ids = {span.span_id for span in spans}
    children: dict[str | None, list[StoredSpan]] = {}
    for span in spans:  # already by start: each sibling list stays in start order
        parent = (
            span.parent_id if span.parent_id in ids and span.parent_id != span.span_id else None
        )
        children.setdefault(parent, []).append(span)
    rows: list[Row] = []
    seen: set[str] = set()
    stack = [(span, 0) for span in reversed(children.get(None, []))]
    while stack:
        span, depth = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        rows.append(Row(span, depth))
        stack += [(child, depth + 1) for child in reversed(children.get(span.span_id, []))]
    # A parent cycle (a corrupt store) has no root: its spans still get a row each.
    rows += [Row(span, 0) for span in spans if span.span_id not in seen]
    return rows


def _axis(spans: list[StoredSpan]) -> tuple[list[Segment], list[Gap]]:
    """Segments of activity split at the long gaps, laid out across the plot."""
    busy: list[tuple[int, int, str]] = []  # merged intervals: (start, end, first span's name)
    for span in spans:
        end = max(span.start_ns, span.end_ns)
        if busy and span.start_ns <= busy[-1][1]:
            busy[-1] = (busy[-1][0], max(busy[-1][1], end), busy[-1][2])
        else:
            busy.append((span.start_ns, end, span.name))
    if not busy:
        return [], []
    busy_ns = sum(end - start for start, end, _ in busy)
    threshold = max(GAP_MIN_NS, busy_ns * GAP_SHARE)
    stretches = [[busy[0][0], busy[0][1]]]
    breaks: list[tuple[int, int, str]] = []
    for (_, previous_end, _), (start, end, name) in pairwise(busy):
        if start - previous_end >= threshold:
            breaks.append((previous_end, start, name))
            stretches.append([start, end])
        else:
            stretches[-1][1] = end
    room = PLOT_X1 - PLOT_X0 - BREAK_W * len(breaks) - MIN_SEGMENT_W * len(stretches)
    total_ns = sum(end - start for start, end in stretches) or 1
    segments, gaps, x = [], [], float(PLOT_X0)
    for index, (start, end) in enumerate(stretches):
        width = MIN_SEGMENT_W + max(room, 0) * (end - start) / total_ns
        segments.append(Segment(start, end, x, x + width))
        x += width
        if index < len(breaks):
            gap_start, gap_end, name = breaks[index]
            gaps.append(Gap(gap_start, gap_end, name, x, x + BREAK_W))
            x += BREAK_W
    return segments, gaps


def waterfall(spans: Sequence[StoredSpan], *, element_id: str, max_spans: int = MAX_SPANS) -> str:
    """The `<svg id=element_id>` of `spans` (one trace); see the module docstring."""
    return render(layout(spans, max_spans), element_id)


def render(plan: Layout, element_id: str) -> str:
    lanes = _gap_lanes(plan.gaps)
    top = 10 + LANE_H * max(len(lanes), 0) + 22
    rows_h = ROW_H * len(plan.rows)
    height = top + rows_h + 46
    names = {span.span_id: span.name for span in (row.span for row in plan.rows)}
    title = f"Trace waterfall: {len(plan.rows)} spans"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-label="{escape(title)}" class="waterfall" id="{escape(element_id)}">',
        f"<title>{escape(title)}</title>",
        _DEFS,
    ]
    parts += _axis_marks(plan, lanes, top, rows_h)
    for index, row in enumerate(plan.rows):
        parts.append(_row(plan, row, top + ROW_H * index, names))
    parts += _legend(plan, top + rows_h + 20)
    parts.append("</svg>")
    return "".join(parts)


def _gap_lanes(gaps: list[Gap]) -> list[list[tuple[Gap, float, float]]]:
    """Gap labels placed on the first line above the axis where they overlap nothing."""
    lanes: list[list[tuple[Gap, float, float]]] = []
    for gap in gaps:
        width = len(gap.label) * CHAR_W
        left = min(max((gap.x0 + gap.x1 - width) / 2, PLOT_X0), PLOT_X1 - width)
        for lane in lanes:
            if lane[-1][2] + 8 <= left:
                lane.append((gap, left, left + width))
                break
        else:
            lanes.append([(gap, left, left + width)])
    return lanes


def _axis_marks(
    plan: Layout, lanes: list[list[tuple[Gap, float, float]]], top: int, rows_h: int
) -> list[str]:
    bottom = top + rows_h
    parts = [
        f'<line x1="{PLOT_X0}" y1="{top}" x2="{PLOT_X1}" y2="{top}" stroke="#6b7280"/>',
        f'<text x="{NAME_W + DUR_W}" y="{top - 6}" text-anchor="end" font-size="11" '
        f'fill="#374151">duration</text>',
        f'<text x="4" y="{top - 6}" font-size="11" fill="#374151">span · service</text>',
    ]
    for segment in plan.segments:
        for t_ns in _ticks(segment):
            x = segment.x(t_ns)
            start = t_ns == segment.start_ns
            if not start and not segment.x0 + 70 <= x <= segment.x1 - 24:
                continue  # its label would run into the start's or off the plot
            # A segment's start is timed from the trace's start; its other ticks from it.
            label = (
                (duration(t_ns - plan.start_ns) if t_ns > plan.start_ns else "0 s")
                if start
                else "+" + duration(t_ns - segment.start_ns)
            )
            parts.append(
                f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e5e7eb"/>'
                f'<text x="{x:.1f}" y="{top - 6}" text-anchor="{"start" if start else "middle"}" '
                f'font-size="10" fill="#374151">{escape(label)}</text>'
            )
    for number, lane in enumerate(lanes):
        for gap, left, _ in lane:
            parts.append(
                f'<text x="{left:.1f}" y="{10 + LANE_H * number + 11}" font-size="11" '
                f'font-weight="bold" fill="#92400e" class="wf-gap">{escape(gap.label)}</text>'
            )
    for gap in plan.gaps:
        mid = (gap.x0 + gap.x1) / 2
        parts.append(
            f'<rect x="{gap.x0 + 6:.1f}" y="{top}" width="{BREAK_W - 12}" height="{rows_h}" '
            f'fill="#fef3c7" stroke="#d97706" stroke-dasharray="4 3">'
            f"<title>{escape(gap.label)}: the axis is cut here</title></rect>"
            f'<text x="{mid:.1f}" y="{top + 14}" text-anchor="middle" font-size="14" '
            f'fill="#92400e">⋯</text>'
        )
    return parts


def _ticks(segment: Segment) -> list[int]:
    """The segment start, then round steps from it, about one per 110 px."""
    span_ns = segment.end_ns - segment.start_ns
    wanted = int((segment.x1 - segment.x0) // 110)
    if span_ns <= 0 or wanted < 2:
        return [segment.start_ns]
    raw = span_ns / wanted
    step = next((s for s in _STEPS if s >= raw), _STEPS[-1])
    return list(range(segment.start_ns, segment.end_ns + 1, step))


# Tick steps: 1, 2 and 5 times a power of ten, from 1 µs to 5000 s.
_STEPS = [m * 10**e for e in range(3, 13) for m in (1, 2, 5)]


def _row(plan: Layout, row: Row, y: int, names: dict[str, str]) -> str:
    span = row.span
    x0 = plan.x(span.start_ns)
    x1 = max(plan.x(span.end_ns), x0 + 2)  # an instant still shows
    bar_y = y + (ROW_H - BAR_H) / 2
    indent = 4 + INDENT * row.depth
    lines, note_x, anchor, inside = _place(_note(span, names), x0, x1)
    status = span.status if span.status in _FILL else "unset"
    if status == "error":
        look = ' fill="#b91c1c" font-weight="bold"'
    else:
        look = ' fill="#fff"' if inside else ""
    if not inside:  # a white halo keeps the note readable across grid lines and breaks
        look += ' stroke="#fff" stroke-width="3" paint-order="stroke"'
    band = ' fill="#f9fafb"' if row.depth == 0 else ' fill="none"'
    return (
        f'<g class="span-row status-{status}" data-name="{escape(span.name)}" '
        f'data-span="{escape(span.span_id)}">'
        f"<title>{escape(_tooltip(span))}</title>"
        f'<rect x="0" y="{y}" width="{WIDTH}" height="{ROW_H}"{band}/>'
        f'<line x1="0" y1="{y + ROW_H}" x2="{WIDTH}" y2="{y + ROW_H}" stroke="#f3f4f6"/>'
        f'<text x="{indent}" y="{y + 14}" font-size="12" font-weight="600" class="wf-name">'
        f"{escape(_cut(span.name, NAME_CHARS - row.depth * 2))}</text>"
        f'<text x="{indent}" y="{y + 27}" font-size="10" fill="#4b5563">'
        f"{escape(span.service)}</text>"
        f'<text x="{NAME_W + DUR_W}" y="{y + 20}" text-anchor="end" font-size="11" '
        f'class="wf-duration">{escape(duration(span.end_ns - span.start_ns))}</text>'
        f'<rect x="{x0:.1f}" y="{bar_y:.1f}" width="{x1 - x0:.1f}" height="{BAR_H}" '
        f'fill="{_FILL[status]}" stroke="#111" stroke-width="0.5"/>'
        f'<text y="{y + (20 if len(lines) == 1 else 14)}" text-anchor="{anchor}" '
        f'font-size="11" class="wf-note"{look}>'
        + "".join(
            f'<tspan x="{note_x:.1f}" dy="{13 * min(i, 1)}">{escape(line)}</tspan>'
            for i, line in enumerate(lines)
        )
        + "</text>"
        "</g>"
    )


def _place(parts: list[str], x0: float, x1: float) -> tuple[list[str], float, str, bool]:
    """(lines, x, anchor, inside the bar) of a row's note: beside its bar, else before it,
    on one line else two; else inside a bar wide enough; else at the plot's end."""
    one, two = _lines(parts, 1), _lines(parts, 2)
    for lines in (one, two):
        width = max(map(len, lines), default=0) * CHAR_W
        if x1 + 6 + width <= PLOT_X1:
            return lines, x1 + 6, "start", False
        if x0 - 6 - width >= PLOT_X0:
            return lines, x0 - 6, "end", False
    if x1 - x0 >= len(one[0]) * CHAR_W + 8:
        return one, x0 + 4, "start", True
    return two, PLOT_X1, "end", False


def _lines(parts: list[str], count: int) -> list[str]:
    """`parts` joined on one line, or on two split where the longer line is shortest."""
    if count == 1 or len(parts) < 2:
        return [_cut(" · ".join(parts), NOTE_CHARS)]
    split = min(
        range(1, len(parts)),
        key=lambda k: max(len(" · ".join(parts[:k])), len(" · ".join(parts[k:]))),
    )
    return [_cut(" · ".join(half), NOTE_CHARS) for half in (parts[:split], parts[split:])]


def _note(span: StoredSpan, names: dict[str, str]) -> list[str]:
    """What the row says beside its bar: status, retries, HTTP, settlement, links."""
    attrs = span.attributes
    parts: list[str] = []
    if span.status == "error":
        parts.append("✕ error" + (f": {span.error}" if span.error else ""))
    if "cloudtasks.retry_count" in attrs:
        reason = attrs.get("cloudtasks.retry_reason")
        parts.append(
            f"retry {attrs['cloudtasks.retry_count']}" + (f" (reason: {reason})" if reason else "")
        )
    method, code = attrs.get("http.request.method"), attrs.get("http.response.status_code")
    if code is not None or method:
        parts.append(" ".join(str(v) for v in (method, code and f"HTTP {code}") if v))
    for key, label in (("hookledger.outcome", "outcome"), ("hookledger.settled_by", "by")):
        if attrs.get(key):
            parts.append(f"{label} {attrs[key]}")
    if span.links:
        linked = [names.get(s) or f"trace {t[:8]}…" for t, s in span.links]
        parts.append("linked to " + ", ".join(linked))
    return parts


def _tooltip(span: StoredSpan) -> str:
    lines = [
        f"{span.name} ({span.service}, {span.kind})",
        f"{duration(span.end_ns - span.start_ns)}, status {span.status}",
    ]
    if span.error:
        lines.append(f"error: {_cut(span.error, TITLE_VALUE_CHARS)}")
    lines += [
        f"{key} = {_cut(_text(value), TITLE_VALUE_CHARS)}"
        for key, value in sorted(span.attributes.items())
    ]
    lines.append(f"span {span.span_id}")
    return "\n".join(lines)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def _legend(plan: Layout, y: int) -> list[str]:
    parts = []
    x = 4
    for status, words in (("ok", "no error"), ("error", "error (hatched, ✕)")):
        parts.append(
            f'<rect x="{x}" y="{y - 10}" width="18" height="12" fill="{_FILL[status]}" '
            f'stroke="#111" stroke-width="0.5"/>'
            f'<text x="{x + 24}" y="{y}" font-size="11">{escape(words)}</text>'
        )
        x += 48 + len(words) * 6
    if plan.gaps:
        parts.append(
            f'<rect x="{x}" y="{y - 10}" width="18" height="12" fill="#fef3c7" stroke="#d97706" '
            f'stroke-dasharray="4 3"/><text x="{x + 24}" y="{y}" font-size="11">'
            "axis cut: nothing ran for the time labelled above</text>"
        )
    if plan.total > len(plan.rows):
        parts.append(
            f'<text x="4" y="{y + 18}" font-size="11" font-weight="bold" class="wf-capped">'
            f"the first {len(plan.rows)} of {plan.total} spans are drawn</text>"
        )
    return parts
