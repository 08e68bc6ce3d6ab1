"""W3C Trace Context's `traceparent` header, read one way for the tracer and its callers."""

from __future__ import annotations

import re

TRACEPARENT = "traceparent"
# version 00: trace id, parent span id, flags; all-zero ids are invalid (W3C Trace Context).
_TRACEPARENT = re.compile(r"00-(?!0{32})([0-9a-f]{32})-(?!0{16})([0-9a-f]{16})-([0-9a-f]{2})")


def parse_traceparent(value: str) -> tuple[str, str, bool] | None:
    """(trace id, span id, sampled) of a version-00 traceparent, or None if unreadable."""
    # Lower-case hex only, as W3C and OpenTelemetry's propagator read it: one rule for both.
    match = _TRACEPARENT.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    trace_id, span_id, flags = match.groups()
    return trace_id, span_id, bool(int(flags, 16) & 1)
