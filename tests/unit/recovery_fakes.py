"""In-memory stand-ins for what the GitHub delivery sweep (shared/recovery) talks to: the
App's delivery log at GitHub, the ledger's recoveries and deliveries, and a task queue.

Each keeps the contract the sweep relies on, no more: GitHub lists newest first, a page at
a time, and counts its calls; a recovery changes only on the version it was read at; a
task name is taken once. Time is the test's: `Moments` is a monotonic clock the fakes move
by a fixed cost per GitHub call, so where a budget stops a run never depends on the machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from shared.github.errors import GitHubError, GitHubRejected
from shared.github.hook_deliveries import DeliveryPage, DeliveryRequest, HookDelivery
from shared.handoff.tasks import EnqueueResult
from shared.ledger.recoveries import OPEN, RECOVERY_STATUSES, Checkpoint, Recovery

CURSOR = "https://api.github.test/app/hook/deliveries?cursor="


class Moments:
    """A monotonic clock (seconds) that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeGitHub:
    """GitHub's App webhook deliveries: each attempt `send` records, listed newest first
    `per_page` at a time; `get` answers an attempt's request, `redeliver` records the ask.
    Each call costs `moments` `cost_s[kind]` seconds; `fail_get` makes `get` raise."""

    def __init__(
        self,
        moments: Moments | None = None,
        *,
        per_page: int = 100,
        cost_s: Mapping[str, float] | None = None,
    ) -> None:
        self.moments = moments or Moments()
        self.per_page = per_page
        self.cost_s = {"page": 0.0, "get": 0.0, "redeliver": 0.0, **(cost_s or {})}
        self.attempts: list[HookDelivery] = []
        self.payloads: dict[str, dict[str, Any]] = {}
        self.redelivered: list[int] = []
        self.fail_get: GitHubError | None = None
        self.calls = 0

    def send(
        self,
        guid: str,
        event: str,
        at: datetime,
        *,
        ok: bool,
        payload: Mapping[str, Any] | None = None,
        redelivery: bool = False,
    ) -> HookDelivery:
        """One attempt GitHub made at `at`: answered in time (`ok`) or failed (a 503)."""
        if payload is not None:
            self.payloads[guid] = dict(payload)
        body = self.payloads.setdefault(guid, {"action": "created"})
        attempt = HookDelivery(
            id=len(self.attempts) + 1,
            guid=guid,
            delivered_at=at,
            redelivery=redelivery,
            status="OK" if ok else "Invalid HTTP Response: 503",
            status_code=200 if ok else 503,
            event=event,
            action=body.get("action"),
            installation_id=(body.get("installation") or {}).get("id"),
            repository_id=(body.get("repository") or {}).get("id"),
            throttled_at=None,
        )
        self.attempts.append(attempt)
        return attempt

    def _cost(self, kind: str) -> None:
        self.calls += 1
        self.moments.advance(self.cost_s[kind])

    def page(
        self, next_url: str | None = None, *, failed_only: bool = False, deadline: Any = None
    ) -> DeliveryPage:
        """Newest first; `failed_only` as `status=failure` (a `status_code` of 400-599),
        kept in the cursor as GitHub keeps the query in its `Link`."""
        self._cost("page")
        if next_url is not None:
            kept, _, at = next_url.removeprefix(CURSOR).rpartition(":")
            failed_only, start = kept == "failure", int(at)
        else:
            start = 0
        newest_first = sorted(self.attempts, key=lambda a: (a.delivered_at, a.id), reverse=True)
        if failed_only:
            newest_first = [a for a in newest_first if 400 <= a.status_code <= 599]
        end = start + self.per_page
        kept = "failure" if failed_only else ""
        following = f"{CURSOR}{kept}:{end}" if end < len(newest_first) else None
        return DeliveryPage(tuple(newest_first[start:end]), following)

    def get(self, delivery_id: int, *, deadline: Any = None) -> DeliveryRequest:
        self._cost("get")
        if self.fail_get is not None:
            raise self.fail_get
        found = [a for a in self.attempts if a.id == delivery_id]
        if not found:
            raise GitHubRejected(f"GitHub App webhook delivery {delivery_id}: 404", status=404)
        headers = {"X-GitHub-Event": found[0].event, "X-GitHub-Delivery": found[0].guid}
        return DeliveryRequest(found[0], headers, dict(self.payloads[found[0].guid]))

    def redeliver(self, delivery_id: int, *, deadline: Any = None) -> None:
        self._cost("redeliver")
        self.redelivered.append(delivery_id)


class FakeRecoveries:
    """`ledger.recoveries`: documents by guid, each change conditional on its version."""

    def __init__(self) -> None:
        self.docs: dict[str, Recovery] = {}
        self.saved = Checkpoint()
        self._versions = 0

    def _version(self) -> int:
        self._versions += 1
        return self._versions

    def checkpoint(self) -> Checkpoint:
        return self.saved

    def save_checkpoint(self, checkpoint: Checkpoint, **run: Any) -> None:
        self.saved = checkpoint

    def open_once(self, recovery: Recovery) -> bool:
        if recovery.guid in self.docs:
            return False
        self.docs[recovery.guid] = replace(recovery, update_time=self._version())
        return True

    def open_page(self, limit: int = 200, after: str | None = None) -> list[Recovery]:
        found = sorted((r for r in self.docs.values() if r.open), key=lambda r: r.guid)
        return [r for r in found if after is None or r.guid > after][:limit]

    def change(self, recovery: Recovery, **fields: Any) -> Recovery | None:
        unknown = set(fields) - (set(Recovery.__dataclass_fields__) - {"update_time"})
        if unknown or fields.get("status", OPEN) not in RECOVERY_STATUSES:
            raise ValueError(f"recovery {recovery.guid}: cannot set {sorted(fields)}")
        stored = self.docs.get(recovery.guid)
        if stored is None or stored.update_time != recovery.update_time:
            return None
        self.docs[recovery.guid] = replace(stored, **fields, update_time=self._version())
        return self.docs[recovery.guid]

    def get_many(self, guids: Iterable[str]) -> dict[str, Recovery]:
        return {guid: self.docs[guid] for guid in guids if guid in self.docs}


@dataclass(frozen=True)
class Recorded:
    """What the sweep reads of a delivery the worker recorded."""

    received_at: datetime


class FakeDeliveries:
    """`ledger.deliveries`, as far as the sweep reads it: which guids the worker recorded."""

    def __init__(self) -> None:
        self.recorded: dict[str, Recorded] = {}

    def record(self, guid: str, at: datetime) -> None:
        self.recorded[guid] = Recorded(at)

    def get(self, source: str, delivery_id: str) -> Recorded | None:
        assert source == "github", source
        return self.recorded.get(delivery_id)


class FakeLedger:
    def __init__(self) -> None:
        self.recoveries = FakeRecoveries()
        self.deliveries = FakeDeliveries()


@dataclass(frozen=True)
class Task:
    task_id: str
    body: bytes


class FakeQueue:
    """A Cloud Tasks queue: each task name is taken once (a second create is `duplicate`)."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def enqueue(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        task_id: str | None = None,
        **options: Any,
    ) -> EnqueueResult:
        assert task_id, "the sweep always names its tasks"
        if any(task.task_id == task_id for task in self.tasks):
            return EnqueueResult("duplicate", task_id)
        self.tasks.append(Task(task_id, body))
        return EnqueueResult("created", task_id)
