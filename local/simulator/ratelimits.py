"""GitHub's REST rate limits in the simulator's fault model ("Rate limits for the REST API").

Every GitHub answer on a repository route carries the primary limit's headers:
`x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (Unix seconds) and `-resource`
(`core`). Each such request spends one unit of the current window (one window for every
caller here); an App's own JWT calls (`/app/...`, minting tokens, its webhook deliveries)
are not counted, but the secondary fault refuses them too.

- Primary limit (`github_rate_limit` in `POST /_sim/faults`: `{"remaining", "limit"?,
  "reset_in_s"?}`): from then on the budget is enforced. A request made with nothing
  left answers 403 with `x-ratelimit-remaining: 0` and GitHub's body ("API rate limit
  exceeded for installation ID 5001." or "… for user ID 4242.", as clients quote it:
  fountainhead/action-wait-for-check#29, rust-lang/rustlings#1208) until the window
  resets at `x-ratelimit-reset`. Left alone (the default) the budget is only counted:
  a window that runs out starts afresh, so a long `make run` never hits it.
- Secondary limit (`github_secondary_limit`: `{"count", "status"?: 403|429,
  "retry_after_s"?}`): the next `count` GitHub requests answer `status` with
  `retry-after` and GitHub's "You have exceeded a secondary rate limit…" body
  (apache/devlake#1322, app-sre/github-mirror#62).

GitHub's troubleshooting page says what a client must do: with `retry-after`, wait that
long; with `x-ratelimit-remaining: 0`, wait until `x-ratelimit-reset`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from local.simulator.state import BadRequest
from shared.clock import Clock, system_clock

DEFAULT_LIMIT = 5000
WINDOW_S = 3600
PRIMARY_DOCS = "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"
SECONDARY_DOCS = (
    "https://docs.github.com/en/free-pro-team@latest/rest/overview/"
    "resources-in-the-rest-api#secondary-rate-limits"
)
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


@dataclass(frozen=True)
class Verdict:
    """What one request gets: its headers, and a refusal (status, body) or None."""

    headers: dict[str, str]
    status: int | None = None
    body: dict[str, Any] | None = None


def _whole(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{key} must be a whole number {low}..{high}, got {value!r}.")
    return value


class RateLimits:
    """The primary window and the secondary fault, thread-safe; `reset()` turns both off."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._limit = DEFAULT_LIMIT
            self._remaining = DEFAULT_LIMIT
            self._reset_at = self._clock() + timedelta(seconds=WINDOW_S)
            self._enforced = False
            self._secondary = 0
            self._secondary_status = 403
            self._retry_after_s = 60
            self._refused = {"primary": 0, "secondary": 0}

    def set_primary(self, value: Any) -> None:
        """`{"remaining", "limit"?, "reset_in_s"?}`, validated whole before any change."""
        if not isinstance(value, dict) or "remaining" not in value:
            raise BadRequest(
                "github_rate_limit must be an object {remaining, limit?, reset_in_s?}."
            )
        unknown = sorted(set(value) - {"remaining", "limit", "reset_in_s"})
        if unknown:
            raise BadRequest(f"github_rate_limit has unknown keys {unknown}.")
        limit = _whole(value.get("limit", DEFAULT_LIMIT), "github_rate_limit.limit", 1, 10**6)
        remaining = _whole(value["remaining"], "github_rate_limit.remaining", 0, limit)
        reset_in_s = _whole(
            value.get("reset_in_s", WINDOW_S), "github_rate_limit.reset_in_s", 1, 86_400
        )
        with self._lock:
            self._limit, self._remaining, self._enforced = limit, remaining, True
            self._reset_at = self._clock() + timedelta(seconds=reset_in_s)

    def set_secondary(self, value: Any) -> None:
        """`{"count", "status"?: 403|429, "retry_after_s"?}`."""
        if not isinstance(value, dict):
            raise BadRequest(
                "github_secondary_limit must be an object {count, status?, retry_after_s?}."
            )
        unknown = sorted(set(value) - {"count", "status", "retry_after_s"})
        if unknown:
            raise BadRequest(f"github_secondary_limit has unknown keys {unknown}.")
        count = _whole(value.get("count", 1), "github_secondary_limit.count", 0, 10**6)
        status = value.get("status", 403)
        if status not in (403, 429):
            raise BadRequest(f"github_secondary_limit.status must be 403 or 429, got {status!r}.")
        retry_after_s = _whole(
            value.get("retry_after_s", 60), "github_secondary_limit.retry_after_s", 0, 3600
        )
        with self._lock:
            self._secondary, self._secondary_status = count, status
            self._retry_after_s = retry_after_s

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {
                "github_rate_limit": {
                    "limit": self._limit,
                    "remaining": self._remaining,
                    "reset": int(self._reset_at.timestamp()),
                    "enforced": self._enforced,
                },
                "github_secondary_limit": {
                    "count": self._secondary,
                    "status": self._secondary_status,
                    "retry_after_s": self._retry_after_s,
                },
                "github_rate_limited": dict(self._refused),
            }

    def secondary(self) -> Verdict | None:
        """The secondary fault alone, for an App's own JWT calls (which spend no installation's
        budget but are limited all the same); None when it does not refuse this request."""
        with self._lock:
            if self._secondary <= 0:
                return None
            self._secondary -= 1
            self._refused["secondary"] += 1
            headers = {"retry-after": str(self._retry_after_s)}
            body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
            return Verdict(headers, self._secondary_status, body)

    def take(self, subject: str) -> Verdict:
        """Spend one request of the window for `subject` (named in the primary's message)."""
        now = self._clock()
        with self._lock:
            self._roll(now)
            if self._secondary > 0:
                self._secondary -= 1
                self._refused["secondary"] += 1
                headers = {**self._headers(), "retry-after": str(self._retry_after_s)}
                body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
                return Verdict(headers, self._secondary_status, body)
            if self._remaining == 0 and self._enforced:
                self._refused["primary"] += 1
                message = f"API rate limit exceeded for {subject}."
                body = {"message": message, "documentation_url": PRIMARY_DOCS}
                return Verdict(self._headers(), 403, body)
            if self._remaining == 0:  # counted only: a fresh window
                self._remaining, self._reset_at = self._limit, now + timedelta(seconds=WINDOW_S)
            self._remaining -= 1
            return Verdict(self._headers())

    def _roll(self, now: datetime) -> None:
        if now >= self._reset_at:
            self._remaining = self._limit
            self._reset_at = now + timedelta(seconds=WINDOW_S)

    def _headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self._limit),
            "x-ratelimit-remaining": str(self._remaining),
            "x-ratelimit-used": str(self._limit - self._remaining),
            "x-ratelimit-reset": str(int(self._reset_at.timestamp())),
            "x-ratelimit-resource": "core",
        }
