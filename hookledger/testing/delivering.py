"""Sending events to the stack, and waiting until what they started is done."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from hookledger.sending import Sent, send_event
from hookledger.testing.stored import Stored
from hookledger.testing.waiting import wait_for
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET
from shared.ledger.records import FINISHED_DELIVERY_STATUSES, SUPERSEDED, TERMINAL_STATUSES

Payload = Mapping[str, Any] | bytes | str | Path


class Delivering(Stored):
    """The sending and waiting part of `Stack`: `send_*`, `wait_*`, `reconcile`."""

    def send_github(self, event: str, payload: Payload, *, delivery_id: str | None = None) -> Sent:
        """POST `payload` to the ingress as GitHub's `event`, signed as GitHub signs it."""
        self._check_settings()
        return send_event(
            self.ingress_url,
            "github",
            event,
            _body(payload),
            secret=LOCAL_GITHUB_SECRET,
            delivery_id=delivery_id,
        )

    def send_gemini(self, event: str, payload: Payload, *, delivery_id: str | None = None) -> Sent:
        """POST `payload` (its `type` must be `event`) as a Gemini static webhook."""
        self._check_settings()
        return send_event(
            self.ingress_url,
            "gemini",
            event,
            _body(payload),
            secret=LOCAL_GEMINI_SECRET,
            delivery_id=delivery_id,
        )

    def wait_handled(
        self, sent_or_delivery_id: Sent | str, *, source: str = "github", timeout_s: float = 60.0
    ) -> dict[str, str]:
        """Wait until every app's record of the delivery is final; app name -> status
        (`done`, `ignored`, `dead`, `unresolved`). `{}` when the ingress itself ignored it
        (no app takes the event, or every app refused its payload): nothing was queued.
        `source` is for a bare delivery id; a `Sent` knows where it was sent."""
        if isinstance(sent_or_delivery_id, Sent):
            sent = sent_or_delivery_id
            source = sent.source
            status = sent.answer.get("status") if isinstance(sent.answer, dict) else None
            if sent.status == 200 and status in ("ignored", "pong"):
                return {}
            if sent.status != 202:
                raise AssertionError(
                    f"delivery {sent.delivery_id} was not accepted: the ingress answered "
                    f"{sent.status} {sent.answer!r}"
                )
            delivery_id = sent.delivery_id
        else:
            delivery_id = sent_or_delivery_id
        seen: dict[str, Any] = {}

        def finished() -> dict[str, str] | None:
            record = self._delivery(source, delivery_id)
            seen["record"] = record
            if record is None or record.get("status") not in FINISHED_DELIVERY_STATUSES:
                return None
            apps = self._registered.handlers.get(f"{source}:{record.get('event')}", [])
            if len(apps) <= 1:  # one app runs under the delivery's own record
                return {(apps[0] if apps else "?"): str(record["status"])}
            ends = {app: self._delivery(source, f"{delivery_id}#{app}") for app in apps}
            return {app: str(end["status"]) for app, end in ends.items() if end is not None}

        return wait_for(
            finished,
            timeout_s=timeout_s,
            what=lambda: (
                f"{source} delivery {delivery_id} to be handled; "
                f"its record: {_brief(seen.get('record'))}"
            ),
        )

    def wait_settled(self, name: str, *, timeout_s: float = 60.0) -> dict[str, Any]:
        """Operation `name`'s record once it is terminal (or superseded): its settling commit,
        which holds the write-back, is done. Its outbox items (a comment, a check run) may
        still be open: `wait_delivered` waits for those."""
        seen: dict[str, Any] = {}

        def settled() -> dict[str, Any] | None:
            record = self.operation(name)
            seen["record"] = record
            return record if record is not None and _final(record) else None

        return wait_for(
            settled,
            timeout_s=timeout_s,
            what=lambda: f"operation {name} to settle; its record: {_brief(seen.get('record'))}",
        )

    def wait_delivered(
        self, name: str, *, sweep: bool = False, timeout_s: float = 60.0
    ) -> dict[str, Any]:
        """Operation `name`'s record once it is settled and every outbox item delivered;
        AssertionError at once, naming the item and why, when one is given up.

        The settling call delivers the items right after its commit. An item it left (it
        crashed after the commit, or the deliverer failed and backs off) is delivered by
        reconcile's sweep only, and the kit runs no scheduler: call `reconcile()`, or pass
        `sweep=True` to run it whenever an item is open, unleased and due.
        """
        seen: dict[str, Any] = {}

        def delivered() -> dict[str, Any] | None:
            record = self.operation(name)
            seen["record"] = record
            if record is None or not _final(record):
                return None
            for item in record["outbox"]:
                if item.get("given_up_at") is not None:
                    raise AssertionError(
                        f"operation {name}: outbox item {item['idempotency_key']} was given up: "
                        f"{item.get('given_up_reason')}"
                    )
            waiting = [item for item in record["outbox"] if item.get("delivered_at") is None]
            if not waiting:
                return record
            if sweep and any(_sweepable(item) for item in waiting):
                self.reconcile()
            return None

        return wait_for(
            delivered,
            timeout_s=timeout_s,
            what=lambda: (
                f"operation {name}'s outbox to be delivered; its record: "
                f"{_brief(seen.get('record'))}, open items: {_open_items(seen.get('record'))}"
                + ("" if sweep else " (an item left to the sweep needs reconcile(), or sweep=True)")
            ),
        )

    def reconcile(self) -> dict[str, Any]:
        """One reconcile run, as Cloud Scheduler starts it; its report."""
        self._check_settings()
        answer = requests.post(f"{self.reconcile_url}/", json={}, timeout=120)
        if answer.status_code != 200:
            raise AssertionError(f"reconcile answered {answer.status_code}: {answer.text[:500]}")
        return dict(answer.json())


def _body(payload: Payload) -> bytes | str | Mapping[str, Any]:
    """A recorded body's bytes for a path; anything else as `send_event` takes it."""
    return payload.read_bytes() if isinstance(payload, Path) else payload


def _final(record: Mapping[str, Any]) -> bool:
    """Settled (terminal) or superseded: no commit will change its status again."""
    return record["status"] in TERMINAL_STATUSES or record["status"] == SUPERSEDED


def _sweepable(item: Mapping[str, Any]) -> bool:
    """An open item reconcile's sweep would take now: no live lease, and due."""
    now = datetime.now(UTC)
    return all(
        not isinstance(item.get(f), datetime) or item[f] <= now
        for f in ("leased_until", "next_attempt_at")
    )


def _open_items(record: Mapping[str, Any] | None) -> list[str]:
    shown = ("attempts", "last_error", "leased_until", "next_attempt_at")
    items = (record or {}).get("outbox", [])
    return [
        f"{item['idempotency_key']} {_fields(item, shown)}"
        for item in items
        if item.get("delivered_at") is None and item.get("given_up_at") is None
    ]


def _fields(record: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {k: record[k] for k in names if record.get(k) is not None}


def _brief(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "none yet"
    shown = ("status", "event", "attempts", "last_error", "writeback_done", "error")
    return repr(_fields(record, shown))
