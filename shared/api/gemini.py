"""Gemini for apps: the gateway (`ctx.gemini`) and what it returns.

    name = ctx.gemini.create_batch(model, [(key, prompt), ...], display_name=tag,
                                   generation_config={...})
    batch = ctx.gemini.fetch_batch(name)      # BatchStatus: state, rows (Row: key, text,
                                              # error, …), terminal_status, rows_complete

A kind's write-back receives the settled `BatchStatus`; its `rows` are placed by request
key (`OperationKind.request_keys`) when the results echo none. Errors are in the tree:
`GeminiUnavailable` transient, `GeminiNotFound` permanent, `GeminiRowsUnread` transient.
"""

from __future__ import annotations

from shared.gemini import (
    TERMINAL_STATES,
    BatchStatus,
    BatchSummary,
    GeminiError,
    GeminiGateway,
    GeminiNotFound,
    GeminiRowsUnread,
    GeminiUnavailable,
    Row,
)

__all__ = [
    "TERMINAL_STATES",
    "BatchStatus",
    "BatchSummary",
    "GeminiError",
    "GeminiGateway",
    "GeminiNotFound",
    "GeminiRowsUnread",
    "GeminiUnavailable",
    "Row",
]
