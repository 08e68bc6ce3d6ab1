"""The Gemini quotas the simulator enforces on `batches.create`, set through `/_sim/quotas`.

Gemini's "Rate limits" page (Batch API section) gives 100 concurrent batch requests per
project, 2 GB per input file and 20 GB of stored files; its Batch API page keeps inline
requests "under 20 MB". The simulator enforces two of them:

- `gemini_batches_in_flight` (null = off, the default; else 0..1,000,000): how many
  batches may be in flight at once. In flight is a batch not yet in a terminal state
  (PENDING or RUNNING, a cancel still under way included); a deleted batch leaves the
  count. The docs do not define the count; this is the reading the capacity model uses
  (bench/_limits.py). A create beyond it answers 429 RESOURCE_EXHAUSTED
  (`gemini.batch_quota_error_body`). Off by default, not 100: existing tests leave up to
  200 batches unfinished (tests/integration/test_simulator_faults.py), and the simulator
  must not change what they see unless a test asks for the quota.
- `gemini_batch_retry_delay_s` (0..3600, default 30): the `RetryInfo.retryDelay` that 429
  carries. Gemini publishes none for this quota; 30 s is ours.
- `gemini_inline_request_bytes` (1..20 MiB, default 20 MiB): the largest create request
  taken; above it Gemini's 400 INVALID_ARGUMENT "Request payload size exceeds the limit:
  N bytes." (the Google API front end's message; 20971520 for the real limit). Lowering
  it lets a test reach the limit without building 20 MB.

The state is one immutable `QuotaSettings`, replaced whole by `update` (validated first:
a bad body changes nothing), plus counts of creates refused per quota.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from local.simulator.errors import BadRequest

BATCHES_IN_FLIGHT = "gemini_batches_in_flight"
BATCH_RETRY_DELAY_S = "gemini_batch_retry_delay_s"
INLINE_REQUEST_BYTES = "gemini_inline_request_bytes"
KEYS = (BATCHES_IN_FLIGHT, BATCH_RETRY_DELAY_S, INLINE_REQUEST_BYTES)

# Gemini refuses a create request (inline requests) over 20 MiB.
MAX_INLINE_REQUEST_BYTES = 20 * 1024 * 1024
MAX_BATCHES_IN_FLIGHT = 1_000_000
DEFAULT_RETRY_DELAY_S = 30.0
MAX_RETRY_DELAY_S = 3600.0


def inline_too_large(limit: int) -> str:
    return f"Request payload size exceeds the limit: {limit} bytes."


@dataclass(frozen=True)
class QuotaSettings:
    batches_in_flight: int | None = None
    batch_retry_delay_s: float = DEFAULT_RETRY_DELAY_S
    inline_request_bytes: int = MAX_INLINE_REQUEST_BYTES


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def merged(settings: QuotaSettings, body: dict[str, Any]) -> QuotaSettings:
    """`settings` with the keys of `body` applied, or `BadRequest` naming the bad key."""
    unknown = sorted(set(body) - set(KEYS))
    if unknown:
        raise BadRequest(f"Unknown quota keys {unknown}; known keys: {list(KEYS)}.")
    changes: dict[str, Any] = {}
    if BATCHES_IN_FLIGHT in body:
        limit = body[BATCHES_IN_FLIGHT]
        if limit is not None and (not _is_int(limit) or not 0 <= limit <= MAX_BATCHES_IN_FLIGHT):
            raise BadRequest(
                f"{BATCHES_IN_FLIGHT} must be null (off) or a whole number "
                f"0..{MAX_BATCHES_IN_FLIGHT}, got {limit!r}."
            )
        changes["batches_in_flight"] = limit
    if BATCH_RETRY_DELAY_S in body:
        delay = body[BATCH_RETRY_DELAY_S]
        if not isinstance(delay, int | float) or isinstance(delay, bool):
            raise BadRequest(f"{BATCH_RETRY_DELAY_S} must be a number of seconds, got {delay!r}.")
        if not 0 <= delay <= MAX_RETRY_DELAY_S:
            raise BadRequest(
                f"{BATCH_RETRY_DELAY_S} must be 0..{MAX_RETRY_DELAY_S:g}, got {delay!r}."
            )
        changes["batch_retry_delay_s"] = float(delay)
    if INLINE_REQUEST_BYTES in body:
        size = body[INLINE_REQUEST_BYTES]
        if not _is_int(size) or not 1 <= size <= MAX_INLINE_REQUEST_BYTES:
            raise BadRequest(
                f"{INLINE_REQUEST_BYTES} must be a whole number 1..{MAX_INLINE_REQUEST_BYTES} "
                f"(Gemini's own limit; the simulator only tightens it), got {size!r}."
            )
        changes["inline_request_bytes"] = size
    return replace(settings, **changes)


class Quotas:
    """The current `QuotaSettings` and how many creates each quota refused; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._settings = QuotaSettings()
            self._refused: Counter[str] = Counter()

    @property
    def settings(self) -> QuotaSettings:
        with self._lock:
            return self._settings

    def update(self, body: dict[str, Any]) -> QuotaSettings:
        """Merge `body` (keys as KEYS) into the settings; a bad body changes nothing."""
        with self._lock:
            self._settings = merged(self._settings, body)
            return self._settings

    def count_refusal(self, quota: str) -> None:
        with self._lock:
            self._refused[quota] += 1

    def report(self, batches_in_flight: int) -> dict[str, Any]:
        """What `GET /_sim/quotas` answers: every key, `in_flight` and `refused` counts."""
        with self._lock:
            settings, refused = self._settings, dict(self._refused)
        return {
            BATCHES_IN_FLIGHT: settings.batches_in_flight,
            BATCH_RETRY_DELAY_S: settings.batch_retry_delay_s,
            INLINE_REQUEST_BYTES: settings.inline_request_bytes,
            "in_flight": {"gemini_batches": batches_in_flight},
            "refused": {
                BATCHES_IN_FLIGHT: refused.get(BATCHES_IN_FLIGHT, 0),
                INLINE_REQUEST_BYTES: refused.get(INLINE_REQUEST_BYTES, 0),
            },
        }
