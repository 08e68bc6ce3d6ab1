"""The console's trace waterfall (hookledger/console/waterfall.py), from hand-made spans."""

from __future__ import annotations

import random
import re

import pytest

from hookledger.console.waterfall import MAX_SPANS, duration, layout, waterfall
from shared.tracing.store import StoredSpan
from tests.trace_samples import MS, PUSH_ROWS, RUN_TRACE, T0_NS, push_trace

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(
    span_id: str, start_ms: float, end_ms: float, parent: str | None = None, **fields
) -> StoredSpan:
    return StoredSpan(
        trace_id=fields.pop("trace_id", TRACE),
        span_id=span_id,
        parent_id=parent,
        name=fields.pop("name", f"op-{span_id}"),
        service=fields.pop("service", "hookledger-worker"),
        kind="internal",
        start_ns=T0_NS + int(start_ms * MS),
        end_ns=T0_NS + int(end_ms * MS),
        status=fields.pop("status", "ok"),
        **fields,
    )


def rows_of(svg: str) -> list[str]:
    return re.findall(r'<g class="span-row[^"]*" data-name="([^"]*)"', svg)


def row_markup(svg: str, span_id: str) -> str:
    return re.search(rf'<g [^>]*data-span="{span_id}">.*?</g>', svg, re.S).group(0)


def test_rows_are_in_tree_order_children_under_parents_siblings_by_start():
    spans = push_trace(TRACE, "push-1", "batches/b1")
    shuffled = random.Random(7).sample(spans, len(spans))

    plan = layout(shuffled)

    assert [(row.span.name, row.depth) for row in plan.rows] == PUSH_ROWS
    assert rows_of(waterfall(shuffled, element_id="w")) == [name for name, _ in PUSH_ROWS]


def test_a_span_whose_parent_is_not_stored_is_a_root():
    spans = [span("a", 0, 10), span("b", 1, 5, parent="a"), span("c", 2, 4, parent="gone")]

    assert [(row.span.span_id, row.depth) for row in layout(spans).rows] == [
        ("a", 0),
        ("b", 1),
        ("c", 0),
    ]


def test_a_long_gap_is_drawn_as_a_labelled_break_and_a_short_one_is_not():
    long_gap = layout(push_trace(TRACE, "push-1", "batches/b1"))
    short_gap = layout([span("a", 0, 100), span("b", 150, 250, name="settle")])

    assert [gap.label for gap in long_gap.gaps] == [
        "⋯ 2.1 s until worker.attempt",
        "⋯ 3 min 2 s until reconcile.check",
    ]
    assert len(long_gap.segments) == 3
    assert short_gap.gaps == [] and len(short_gap.segments) == 1
    svg = waterfall(push_trace(TRACE, "push-1", "batches/b1"), element_id="w")
    assert "⋯ 3 min 2 s until reconcile.check" in svg


def test_the_bars_after_a_break_keep_a_readable_width():
    plan = layout(push_trace(TRACE, "push-1", "batches/b1"))
    check = next(row.span for row in plan.rows if row.span.name == "reconcile.check")

    assert plan.x(check.end_ns) - plan.x(check.start_ns) > 100  # not squeezed to a pixel


def test_an_error_is_labelled_in_text_not_by_colour_alone_and_retries_are_shown():
    svg = waterfall(push_trace(TRACE, "push-1", "batches/b1"), element_id="w")
    first, second = re.findall(
        r'<g class="span-row[^"]*" data-name="worker.attempt".*?</g>', svg, re.S
    )

    assert 'class="span-row status-error"' in first
    assert "✕ error: GitHub answered 502 three times" in first
    assert "retry 0" in first and "HTTP 503" in first
    assert (
        "status-ok" in second and "retry 1 (reason: HTTP 503)" in second and "error" not in second
    )


def test_a_link_names_the_linked_span_when_it_is_drawn_else_its_trace():
    spans = push_trace(TRACE, "push-1", "batches/b1")
    svg = waterfall(spans, element_id="w")
    settle, check = (
        next(s for s in spans if s.name == name) for name in ("settle", "reconcile.check")
    )

    assert "linked to worker.attempt" in row_markup(svg, settle.span_id)
    assert f"linked to worker.attempt, trace {RUN_TRACE[:8]}…" in row_markup(svg, check.span_id)


def test_names_attributes_and_errors_are_escaped():
    hostile = span(
        "x",
        0,
        5,
        name="<script>alert(1)</script>",
        service='"><b>',
        status="error",
        error="<img src=x onerror=alert(1)>",
        attributes={"url.path": "/a?b=<c>&d"},
    )

    svg = waterfall([hostile], element_id='w"><script>')

    assert "<script>" not in svg and "<img" not in svg and "<b>" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert "url.path = /a?b=&lt;c&gt;&amp;d" in svg  # the tooltip


def test_at_most_max_spans_are_drawn_and_the_chart_says_so():
    many = [span(f"{i:04x}", i, i + 0.5) for i in range(MAX_SPANS + 10)]

    svg = waterfall(many, element_id="w")

    assert len(rows_of(svg)) == MAX_SPANS
    assert f"the first {MAX_SPANS} of {MAX_SPANS + 10} spans are drawn" in svg
    assert "spans are drawn" not in waterfall(many[:5], element_id="w")


def test_no_spans_draw_an_empty_chart():
    assert rows_of(waterfall([], element_id="w")) == []


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (400_000, "0.4 ms"),
        (42 * MS, "42 ms"),
        (2_100 * MS, "2.1 s"),
        (42_000 * MS, "42 s"),
        (182_000 * MS, "3 min 2 s"),
        (3_720_000 * MS, "1 h 2 min"),
    ],
)
def test_durations_read_in_ms_s_and_min(ns, text):
    assert duration(ns) == text, text


def test_a_note_too_long_for_either_side_of_its_bar_takes_two_lines():
    spans = push_trace(TRACE, "push-1", "batches/b1")
    second = [s for s in spans if s.name == "worker.attempt"][1]

    note = re.search(
        r'<text [^>]*class="wf-note".*?</text>',
        row_markup(waterfall(spans, element_id="w"), second.span_id),
        re.S,
    ).group(0)

    assert re.findall(r"<tspan [^>]*>([^<]*)</tspan>", note) == [
        "retry 1 (reason: HTTP 503)",
        "HTTP 200 · outcome done",
    ]
