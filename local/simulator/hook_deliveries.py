"""The App webhook's deliveries as GitHub records them, and the one path that sends them.

Every webhook the simulator's GitHub sends goes through `HookDeliveries.send()`: one
attempt (`github_webhooks.post`), recorded as one delivery. The record has the fields of
GitHub's "REST API endpoints for GitHub App webhooks" ("List deliveries for an app
webhook": `id`, increasing; `guid`, the `X-GitHub-Delivery` shared by every delivery of an
event; `delivered_at`; `redelivery`; `duration` in seconds; `status`, `OK` or what went
wrong; `status_code`; `event`; `action`, `installation_id`, `repository_id` from the
payload, or null; `throttled_at`), and "Get a delivery for an app webhook" adds `url`,
`request` `{headers, payload}` (the payload as the JSON object sent) and `response`
`{headers, payload}` (the body as text; both null without an answer). Outcomes and their
descriptions: `github_webhooks.py`.

- Lists are newest first (by `id`, which increases with every attempt), as the sample
  script of "Automatically redelivering failed deliveries for a GitHub App webhook"
  relies on; `status=success` keeps a `status_code` of 200-399 and `status=failure` one
  of 400-599, the ranges the list endpoint documents.
- Retention: "Viewing webhook deliveries" and "Redelivering webhooks" keep 3 days on
  github.com. Past that a delivery is no longer listed, a GET of it is 404, and a
  redelivery is refused (`TooOld`; the answer is up to the route). The log itself keeps
  it for `/_sim/` inspection, marked `expired`.
- A redelivery ("Redeliver a delivery for an app webhook") re-sends the same request,
  headers and body (same `X-GitHub-Delivery`, same signature), to the url the delivery
  went to, on a background thread: GitHub answers 202 and delivers later. It is a new
  delivery: new `id`, same `guid`, `redelivery: true`. `wait_for()` lets a test wait for
  it (a `Condition`, no polling).
- Throttling ("Troubleshooting webhooks": during a surge GitHub "may temporarily throttle"
  deliveries, and `throttled_at` "shows the timestamp when delivery was throttled"; the
  docs' example delivery has `throttled_at` with `status` `OK`, delivered in the end): a
  throttled send is recorded at once with `throttled_at`, is not sent, and shows
  `status` `THROTTLED` and `status_code` 0 (what GitHub shows meanwhile is not
  documented). `release()` sends the held ones later, updating them in place
  (`delivered_at`, `status`, ...; `throttled_at` stays).
- `age()` moves `delivered_at` (and `throttled_at`) back, to test the 3-day window.

`reset()` empties everything; a redelivery still in flight then records nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from local.simulator.github_webhooks import NO_ANSWER, Answer, SignedRequest, post
from shared.clock import Clock, system_clock

RETENTION = timedelta(days=3)
THROTTLED = "throttled"
OUTCOMES = {"success": (200, 399), "failure": (400, 599)}


class UnknownDelivery(Exception):
    """No delivery with that id is visible (never recorded, or past retention)."""


class TooOld(Exception):
    """The delivery is older than `RETENTION`: GitHub no longer redelivers it."""


@dataclass
class StoredDelivery:
    id: int
    url: str
    request: SignedRequest
    redelivery: bool
    delivered_at: datetime
    throttled_at: datetime | None = None
    answer: Answer | None = None  # None: held by throttling, not sent (yet)
    sending: bool = False  # a release is sending it now

    @property
    def status_code(self) -> int:
        return NO_ANSWER if self.answer is None else self.answer.status_code


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _field(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def item_json(delivery: StoredDelivery) -> dict[str, Any]:
    """A delivery as "List deliveries for an app webhook" shows it."""
    payload = delivery.request.payload()
    action = _field(payload, "action")
    installation, repository = _field(payload, "installation"), _field(payload, "repository")
    answer = delivery.answer
    return {
        "id": delivery.id,
        "guid": delivery.request.guid,
        "delivered_at": _iso(delivery.delivered_at),
        "redelivery": delivery.redelivery,
        "duration": 0.0 if answer is None else answer.duration,
        "status": THROTTLED if answer is None else answer.status,
        "status_code": delivery.status_code,
        "event": delivery.request.headers["X-GitHub-Event"],
        "action": action if isinstance(action, str) else None,
        "installation_id": _whole(_field(installation, "id")),
        "repository_id": _whole(_field(repository, "id")),
        "throttled_at": _iso(delivery.throttled_at),
    }


def full_json(delivery: StoredDelivery) -> dict[str, Any]:
    """A delivery as "Get a delivery for an app webhook" shows it."""
    answer = delivery.answer
    return {
        **item_json(delivery),
        "url": delivery.url,
        "request": {
            "headers": dict(delivery.request.headers),
            "payload": delivery.request.payload(),
        },
        "response": {
            "headers": None if answer is None else answer.headers,
            "payload": None if answer is None else answer.payload,
        },
    }


def outcome_json(delivery: StoredDelivery) -> dict[str, Any]:
    """The older answer of `POST /_sim/github/check-runs/{id}/rerequest`: `{delivery_id
    (the guid), event, action, target, status (HTTP status, None without an answer), ok,
    error, answer (the response body)}`, plus the recorded `hook_delivery_id`."""
    answer = delivery.answer
    item = item_json(delivery)
    return {
        "delivery_id": delivery.request.guid,
        "event": item["event"],
        "action": item["action"] or "",
        "target": delivery.url,
        "status": None if answer is None or answer.status_code == NO_ANSWER else answer.status_code,
        "ok": answer is not None and answer.ok,
        "error": None if answer is not None and answer.ok else item["status"],
        "answer": "" if answer is None else answer.payload or "",
        "hook_delivery_id": delivery.id,
    }


class HookDeliveries:
    """Thread-safe log of the App webhook's deliveries, its throttle, and its sender."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._changed = threading.Condition(threading.Lock())
        self._generation = 0
        self.reset()

    def reset(self) -> None:
        with self._changed:
            self._deliveries: dict[int, StoredDelivery] = {}
            self._next_id = 1
            self._throttle_count = 0
            self._throttle_until: datetime | None = None
            self._generation += 1  # deliveries still in flight record nothing
            self._changed.notify_all()

    # --- sending ------------------------------------------------------------------------

    def send(
        self,
        url: str,
        request: SignedRequest,
        *,
        timeout_s: float,
        redelivery: bool = False,
        generation: int | None = None,
    ) -> StoredDelivery | None:
        """One attempt, recorded; a copy of the record, or None when the log was reset
        meanwhile (or before, for `generation`). Throttled: recorded, not sent."""
        started = self._clock()
        with self._changed:
            if generation is not None and generation != self._generation:
                return None
            generation = self._generation
            if self._take_throttle(started):
                return self._record(url, request, redelivery, started, throttled=True)
        answer = post(url, request, timeout_s)
        with self._changed:
            if generation != self._generation:
                return None
            return self._record(url, request, redelivery, started, answer=answer)

    def redeliver(self, delivery_id: int, timeout_s: float) -> None:
        """Send delivery `delivery_id` again on a background thread, as a new delivery."""
        with self._changed:
            original = self._visible(delivery_id)
            if original.delivered_at < self._clock() - RETENTION:
                raise TooOld(delivery_id)
            generation = self._generation
        threading.Thread(
            target=self.send,
            args=(original.url, original.request),
            kwargs={"timeout_s": timeout_s, "redelivery": True, "generation": generation},
            name=f"redeliver-{delivery_id}",
            daemon=True,
        ).start()

    def throttle(self, count: int = 0, seconds: float = 0.0) -> dict[str, Any]:
        """Throttle the next `count` sends, and every send for `seconds` from now (0, 0:
        off); the state after."""
        with self._changed:
            self._throttle_count = count
            self._throttle_until = (
                self._clock() + timedelta(seconds=seconds) if seconds > 0 else None
            )
            return self._throttle_state()

    def release(self, timeout_s: float) -> list[StoredDelivery]:
        """Send every held (throttled) delivery now, oldest first; the updated records."""
        with self._changed:
            held = [d for d in self._ordered() if d.answer is None and not d.sending]
            for delivery in held:
                delivery.sending = True
            generation = self._generation
        released = []
        for delivery in reversed(held):
            sent_at = self._clock()
            answer = post(delivery.url, delivery.request, timeout_s)
            with self._changed:
                if generation != self._generation:
                    break
                delivery.answer, delivery.delivered_at, delivery.sending = answer, sent_at, False
                released.append(replace(delivery))
                self._changed.notify_all()
        return released

    # --- reading ------------------------------------------------------------------------

    def get(self, delivery_id: int) -> StoredDelivery:
        """The delivery, unless unknown or past retention (`UnknownDelivery`)."""
        with self._changed:
            found = self._visible(delivery_id)
            if found.delivered_at < self._clock() - RETENTION:
                raise UnknownDelivery(delivery_id)
            return replace(found)

    def page(
        self, *, outcome: str | None, start: int | None, per_page: int
    ) -> tuple[list[StoredDelivery], int | None, int | None]:
        """(this page, newest first, from delivery id `start` on; the next page's first id;
        the previous page's first id) among the retained deliveries with that `outcome`."""
        low, high = OUTCOMES.get(outcome or "", (None, None))
        with self._changed:
            oldest = self._clock() - RETENTION
            listed = [
                replace(d)
                for d in self._ordered()
                if d.delivered_at >= oldest
                and (low is None or high is None or low <= d.status_code <= high)
            ]
        index = 0
        if start is not None:
            index = next((i for i, d in enumerate(listed) if d.id <= start), len(listed))
        after = index + per_page
        next_id = listed[after].id if after < len(listed) else None
        prev_id = listed[max(0, index - per_page)].id if index > 0 else None
        return listed[index:after], next_id, prev_id

    def every(self, guid: str | None = None) -> list[tuple[StoredDelivery, bool]]:
        """Every recorded delivery (of `guid`), newest first, with whether it is expired."""
        with self._changed:
            oldest = self._clock() - RETENTION
            return [
                (replace(d), d.delivered_at < oldest)
                for d in self._ordered()
                if guid is None or d.request.guid == guid
            ]

    def wait_for(
        self, guid: str, count: int, timeout_s: float
    ) -> tuple[bool, list[StoredDelivery]]:
        """Wait until at least `count` deliveries of `guid` are recorded, at most
        `timeout_s`: (whether they were, the deliveries of `guid` newest first)."""

        def of_guid() -> list[StoredDelivery]:
            return [d for d in self._ordered() if d.request.guid == guid]

        with self._changed:
            done = self._changed.wait_for(lambda: len(of_guid()) >= count, timeout=timeout_s)
            return done, [replace(d) for d in of_guid()]

    def age(self, seconds: float, ids: Iterable[int] | None = None) -> int:
        """Move `delivered_at` and `throttled_at` of the deliveries `ids` (default: all)
        back by `seconds`; how many were moved."""
        shift = timedelta(seconds=seconds)
        wanted = None if ids is None else set(ids)
        with self._changed:
            hit = [d for d in self._deliveries.values() if wanted is None or d.id in wanted]
            for delivery in hit:
                delivery.delivered_at -= shift
                if delivery.throttled_at is not None:
                    delivery.throttled_at -= shift
            return len(hit)

    def throttle_state(self) -> dict[str, Any]:
        with self._changed:
            return self._throttle_state()

    # --- under the lock -----------------------------------------------------------------

    def _record(
        self,
        url: str,
        request: SignedRequest,
        redelivery: bool,
        at: datetime,
        *,
        answer: Answer | None = None,
        throttled: bool = False,
    ) -> StoredDelivery:
        delivery = StoredDelivery(
            self._next_id, url, request, redelivery, at, at if throttled else None, answer
        )
        self._deliveries[delivery.id] = delivery
        self._next_id += 1
        self._changed.notify_all()
        return replace(delivery)

    def _visible(self, delivery_id: int) -> StoredDelivery:
        found = self._deliveries.get(delivery_id)
        if found is None:
            raise UnknownDelivery(delivery_id)
        return found

    def _ordered(self) -> list[StoredDelivery]:
        return sorted(self._deliveries.values(), key=lambda d: d.id, reverse=True)

    def _take_throttle(self, now: datetime) -> bool:
        if self._throttle_until is not None and now < self._throttle_until:
            return True
        if self._throttle_count > 0:
            self._throttle_count -= 1
            return True
        return False

    def _throttle_state(self) -> dict[str, Any]:
        until = self._throttle_until
        active = until is not None and until > self._clock()
        return {"count": self._throttle_count, "until": _iso(until) if active else None}
