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
- Secondary per-endpoint limit (`github_endpoint_limit`: `{"enabled"?: true,
  "rest_points_per_minute"?: 900, "graphql_points_per_minute"?: 2000, "status"?: 403|429}`;
  off by default): GitHub's "No more than 900 points per minute are allowed for REST API
  endpoints, and no more than 2,000 points per minute for the GraphQL API endpoint", a
  REST GET/HEAD/OPTIONS costing 1 point, a POST/PATCH/PUT/DELETE 5, a GraphQL query 1 and
  a mutation 5 ("Calculating points for the secondary rate limit"). An endpoint is a method
  and route (`GET /repos/<owner>/<repo>/contents/<path:path>`, `POST /graphql`); its points
  are counted over the last 60 s (one budget for every caller here, as the other limits).
  A request that would pass the budget answers `status` with GitHub's secondary-limit body
  and `retry-after`: the seconds until enough of the minute's points have aged out. Refused
  requests spend nothing. The App's own calls are limited too.

The primary window is one for REST and GraphQL alike (GitHub keeps a separate 5,000-point
`graphql` one): a GraphQL answer says `x-ratelimit-resource: graphql`, and a GraphQL
request refused by it is answered as GitHub's GraphQL answers it (github_routes.py).

GitHub's troubleshooting page says what a client must do: with `retry-after`, wait that
long; with `x-ratelimit-remaining: 0`, wait until `x-ratelimit-reset`.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from local.simulator.errors import BadRequest
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
REST_POINTS_PER_MINUTE = 900
GRAPHQL_POINTS_PER_MINUTE = 2000
ENDPOINT_WINDOW_S = 60.0
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})


def rest_points(method: str) -> int:
    """A REST request's points for the secondary limit: 5 for a write, else 1."""
    return 5 if method.upper() in WRITE_METHODS else 1


@dataclass(frozen=True)
class Spend:
    """One request's claim on the per-endpoint limit: which endpoint, how many points, and
    whether it is the GraphQL endpoint (its own budget)."""

    endpoint: str
    points: int = 1
    graphql: bool = False


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
            self._refused = {"primary": 0, "secondary": 0, "endpoint": 0}
            self._endpoint_on = False
            self._rest_budget = REST_POINTS_PER_MINUTE
            self._graphql_budget = GRAPHQL_POINTS_PER_MINUTE
            self._endpoint_status = 403
            self._spent: dict[str, deque[tuple[float, int]]] = {}

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

    def set_endpoint(self, value: Any) -> None:
        """`{"enabled"?, "rest_points_per_minute"?, "graphql_points_per_minute"?, "status"?}`,
        validated whole before any change; a key left out keeps its value."""
        key = "github_endpoint_limit"
        if not isinstance(value, dict):
            raise BadRequest(
                f"{key} must be an object {{enabled?, rest_points_per_minute?, "
                "graphql_points_per_minute?, status?}."
            )
        known = {"enabled", "rest_points_per_minute", "graphql_points_per_minute", "status"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise BadRequest(f"{key} has unknown keys {unknown}.")
        enabled = value.get("enabled", True)
        if not isinstance(enabled, bool):
            raise BadRequest(f"{key}.enabled must be true or false, got {enabled!r}.")
        with self._lock:
            rest, graphql, status = self._rest_budget, self._graphql_budget, self._endpoint_status
        rest = _whole(
            value.get("rest_points_per_minute", rest), f"{key}.rest_points_per_minute", 1, 10**6
        )
        graphql = _whole(
            value.get("graphql_points_per_minute", graphql),
            f"{key}.graphql_points_per_minute",
            1,
            10**6,
        )
        status = value.get("status", status)
        if status not in (403, 429):
            raise BadRequest(f"{key}.status must be 403 or 429, got {status!r}.")
        with self._lock:
            self._endpoint_on, self._rest_budget, self._graphql_budget = enabled, rest, graphql
            self._endpoint_status = status
            if not enabled:
                self._spent.clear()

    def report(self) -> dict[str, Any]:
        now = self._clock().timestamp()
        with self._lock:
            used = {endpoint: self._used(endpoint, now) for endpoint in sorted(self._spent)}
            return {
                "github_endpoint_limit": {
                    "enabled": self._endpoint_on,
                    "rest_points_per_minute": self._rest_budget,
                    "graphql_points_per_minute": self._graphql_budget,
                    "status": self._endpoint_status,
                    "used": {endpoint: points for endpoint, points in used.items() if points},
                },
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

    def secondary(self, spend: Spend | None = None) -> Verdict | None:
        """The secondary limits alone (the fault, then the per-endpoint budget when `spend`
        says what this request costs), for an App's own JWT calls, which spend no
        installation's budget but are limited all the same; None when neither refuses."""
        now = self._clock().timestamp()
        with self._lock:
            if self._secondary > 0:
                self._secondary -= 1
                self._refused["secondary"] += 1
                headers = {"retry-after": str(self._retry_after_s)}
                body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
                return Verdict(headers, self._secondary_status, body)
            limited = self._endpoint_verdict(spend, now, {})
            if limited is None:
                self._record(spend, now)
            return limited

    def take(self, subject: str, spend: Spend | None = None) -> Verdict:
        """Spend one request of the window for `subject` (named in the primary's message),
        and `spend`'s points of its endpoint's minute when that limit is on."""
        now = self._clock()
        resource = "graphql" if spend is not None and spend.graphql else "core"
        with self._lock:
            self._roll(now)
            if self._secondary > 0:
                self._secondary -= 1
                self._refused["secondary"] += 1
                headers = {**self._headers(resource), "retry-after": str(self._retry_after_s)}
                body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
                return Verdict(headers, self._secondary_status, body)
            limited = self._endpoint_verdict(spend, now.timestamp(), self._headers(resource))
            if limited is not None:
                return limited
            if self._remaining == 0 and self._enforced:
                self._refused["primary"] += 1
                message = f"API rate limit exceeded for {subject}."
                body = {"message": message, "documentation_url": PRIMARY_DOCS}
                return Verdict(self._headers(resource), 403, body)
            if self._remaining == 0:  # counted only: a fresh window
                self._remaining, self._reset_at = self._limit, now + timedelta(seconds=WINDOW_S)
            self._remaining -= 1
            self._record(spend, now.timestamp())
            return Verdict(self._headers(resource))

    def _endpoint_verdict(
        self, spend: Spend | None, now: float, headers: dict[str, str]
    ) -> Verdict | None:
        """A refusal when `spend` would take its endpoint past the minute's budget (locked)."""
        if spend is None or not self._endpoint_on:
            return None
        budget = self._graphql_budget if spend.graphql else self._rest_budget
        spent = self._spent.get(spend.endpoint, deque())
        used = self._used(spend.endpoint, now)
        if used + spend.points <= budget:
            return None
        # Wait until enough of the minute's points have aged out for this request to fit.
        freed, wait_s = used, ENDPOINT_WINDOW_S
        for at, points in spent:
            freed -= points
            if freed + spend.points <= budget:
                wait_s = at + ENDPOINT_WINDOW_S - now
                break
        self._refused["endpoint"] += 1
        retry_after = str(max(1, math.ceil(wait_s)))
        body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
        return Verdict({**headers, "retry-after": retry_after}, self._endpoint_status, body)

    def _used(self, endpoint: str, now: float) -> int:
        """Points `endpoint` spent in the last minute, dropping older ones (locked)."""
        spent = self._spent.get(endpoint)
        if spent is None:
            return 0
        while spent and spent[0][0] <= now - ENDPOINT_WINDOW_S:
            spent.popleft()
        return sum(points for _, points in spent)

    def _record(self, spend: Spend | None, now: float) -> None:
        if spend is not None and self._endpoint_on:
            self._spent.setdefault(spend.endpoint, deque()).append((now, spend.points))

    def _roll(self, now: datetime) -> None:
        if now >= self._reset_at:
            self._remaining = self._limit
            self._reset_at = now + timedelta(seconds=WINDOW_S)

    def _headers(self, resource: str = "core") -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self._limit),
            "x-ratelimit-remaining": str(self._remaining),
            "x-ratelimit-used": str(self._limit - self._remaining),
            "x-ratelimit-reset": str(int(self._reset_at.timestamp())),
            "x-ratelimit-resource": resource,
        }
