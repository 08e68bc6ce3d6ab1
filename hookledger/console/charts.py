"""Server-side inline SVG charts, readable without colour: patterns, markers and labels.

Each function returns a complete `<svg>` string built only from numbers and fixed
labels passed in by the caller (escaped here anyway), so a template may mark it safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 28, 36

_DEFS = (
    "<defs>"
    '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/>'
    '<line x1="0" y1="0" x2="0" y2="6" stroke="#b45309" stroke-width="3"/></pattern>'
    "</defs>"
)


def _frame(title: str, top: float, unit: str) -> list[str]:
    """Axes and three horizontal grid lines labelled from 0 to `top`."""
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" class="chart">',
        f"<title>{escape(title)}</title>",
        _DEFS,
    ]
    for step in range(4):
        value = top * step / 3
        y = TOP + plot_h - plot_h * step / 3
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
            f"{_short(value)}{escape(unit)}</text>"
        )
    return parts


def _short(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _hour_labels(hours: Sequence[str], slot: float) -> list[str]:
    labels = []
    for index, label in enumerate(hours):
        if index % 3 == 0:
            x = LEFT + slot * index + slot / 2
            labels.append(
                f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                f'font-size="11">{escape(label)}</text>'
            )
    return labels


def settlements_chart(
    hours: Sequence[str], webhook: Sequence[int], reconcile: Sequence[int]
) -> str:
    """Grouped bars per hour: webhook solid, reconcile hatched; each non-zero bar labelled."""
    top = max([*webhook, *reconcile, 1])
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(len(hours), 1)
    bar = max(slot / 2 - 2, 1)
    parts = _frame("Settlements per hour, last 24 h, by webhook and by reconcile", top, "")
    for index, (w, r) in enumerate(zip(webhook, reconcile, strict=True)):
        x0 = LEFT + slot * index + 1
        for offset, value, fill, letter in ((0, w, "#1d4ed8", "W"), (bar, r, "url(#hatch)", "R")):
            if not value:
                continue
            h = plot_h * value / top
            y = TOP + plot_h - h
            parts.append(
                f'<rect x="{x0 + offset:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{fill}" stroke="#111" stroke-width="0.5" class="bar-{letter}">'
                f"<title>{escape(hours[index])}: {value} by "
                f"{'webhook' if letter == 'W' else 'reconcile'}</title></rect>"
                f'<text x="{x0 + offset + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                f'font-size="9">{letter}{value}</text>'
            )
    parts += _hour_labels(hours, slot)
    parts.append(
        f'<rect x="{LEFT}" y="6" width="12" height="12" fill="#1d4ed8" stroke="#111"/>'
        f'<text x="{LEFT + 16}" y="16" font-size="12">W = webhook (solid)</text>'
        f'<rect x="{LEFT + 170}" y="6" width="12" height="12" fill="url(#hatch)" stroke="#111"/>'
        f'<text x="{LEFT + 186}" y="16" font-size="12">R = reconcile (hatched)</text>'
        "</svg>"
    )
    return "".join(parts)


def latency_chart(
    hours: Sequence[str], p50: Sequence[float | None], p99: Sequence[float | None]
) -> str:
    """p50 (solid line, circles) and p99 (dashed line, squares) in seconds, per hour."""
    values = [v for v in (*p50, *p99) if v is not None]
    top = max([*values, 1.0])
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(len(hours), 1)
    parts = _frame("Webhook to settled latency per hour, p50 and p99, seconds", top, "s")
    for series, dash, marker in ((p50, "", "circle"), (p99, ' stroke-dasharray="6 4"', "square")):
        points = [
            (LEFT + slot * i + slot / 2, TOP + plot_h - plot_h * v / top, v)
            for i, v in enumerate(series)
            if v is not None
        ]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="#111" stroke-width="1.5"{dash}/>'
            )
        for x, y, v in points:
            shape = (
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#1d4ed8" class="p50"/>'
                if marker == "circle"
                else f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" '
                f'fill="#b45309" class="p99"/>'
            )
            parts.append(shape)
            label = "p50" if marker == "circle" else "p99"
            parts.append(
                f'<text x="{x:.1f}" y="{y - 6:.1f}" text-anchor="middle" font-size="9">'
                f"{label} {_short(v)}s</text>"
            )
    parts += _hour_labels(hours, slot)
    parts.append(
        f'<circle cx="{LEFT + 6}" cy="12" r="4" fill="#1d4ed8"/>'
        f'<text x="{LEFT + 16}" y="16" font-size="12">p50 (solid line, circles)</text>'
        f'<rect x="{LEFT + 200}" y="8" width="8" height="8" fill="#b45309"/>'
        f'<text x="{LEFT + 214}" y="16" font-size="12">p99 (dashed line, squares)</text>'
        "</svg>"
    )
    return "".join(parts)
