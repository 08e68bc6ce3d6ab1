"""The final table: one row per scenario (Markdown, so it pastes into the README)."""

from __future__ import annotations

from collections.abc import Iterable

from local.chaos.runner import Row

HEADER = ("scenario", "size", "expected", "observed", "s to quiet", "result")


def table(rows: Iterable[Row]) -> str:
    lines = [_line(HEADER), _line(tuple("---" for _ in HEADER))]
    for row in rows:
        seconds = "" if row.seconds is None else f"{row.seconds:.1f}"
        if row.passed is None:
            result = f"skipped: {row.skipped}"
        else:
            result = "pass" if row.passed else f"FAIL ({len(row.violations)} violations)"
        lines.append(
            _line((row.scenario, str(row.size), row.expected, row.observed, seconds, result))
        )
    return "\n".join(lines)


def _line(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"
