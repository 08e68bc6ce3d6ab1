"""Gemini: the few calls hookledger makes through google-genai, their errors and result rows.

- `client.py`: `GeminiGateway` (create, fetch, list, cancel, read results), `make_client`;
- `batches.py`: what a fetch returns (`BatchStatus`, `BatchStats`, `BatchSummary`) and
  the readers of Gemini's answers behind it;
- `requests.py`: what a create sends (inline requests, job config, `HOOKLEDGER_ID`);
- `errors.py`: the Gemini error tree and `mapped(what)`, the SDK-error mapping;
- `rows.py`: result rows (text, truncated text, or an error with its reason) from inline
  responses or a streamed results file, and their placement under the requests;
- `states.py`: the one table of every state the SDK reports and what it means;
- `raw.py`: the one adapter for the SDK's private raw read, with its contract check.

Callers import from here (`from shared.gemini import GeminiGateway`). See
docs/architecture.md, "Code map".
"""

from __future__ import annotations

from shared.gemini.client import (
    HOOKLEDGER_ID,
    MAX_INLINE_BYTES,
    BatchStats,
    BatchStatus,
    BatchSummary,
    GeminiGateway,
    Row,
    make_client,
    sdk_retry_options,
)
from shared.gemini.errors import (
    DAILY_QUOTA_DEFER_S,
    GeminiError,
    GeminiNotFound,
    GeminiRateLimited,
    GeminiRefusedDeployment,
    GeminiRejected,
    GeminiRowsUnread,
    GeminiUnavailable,
    mapped,
    rate_limit_details,
)
from shared.gemini.states import (
    INTERACTION_STATES,
    STATES,
    TERMINAL_STATES,
    StateMeaning,
    meaning_of,
)

__all__ = [
    "DAILY_QUOTA_DEFER_S",
    "HOOKLEDGER_ID",
    "INTERACTION_STATES",
    "MAX_INLINE_BYTES",
    "STATES",
    "TERMINAL_STATES",
    "BatchStats",
    "BatchStatus",
    "BatchSummary",
    "GeminiError",
    "GeminiGateway",
    "GeminiNotFound",
    "GeminiRateLimited",
    "GeminiRefusedDeployment",
    "GeminiRejected",
    "GeminiRowsUnread",
    "GeminiUnavailable",
    "Row",
    "StateMeaning",
    "make_client",
    "mapped",
    "meaning_of",
    "rate_limit_details",
    "sdk_retry_options",
]
