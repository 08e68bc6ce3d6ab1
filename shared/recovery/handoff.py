"""A delivery read back from GitHub, handed to the worker the way the ingress hands one.

Why this is as trustworthy as a verified signature: the payload and headers come from
GitHub's API over TLS, in an answer to a request the sweep authenticated with the App's
own JWT (`GET /app/hook/deliveries/{id}`), so GitHub vouches for them exactly as its
HMAC does on a webhook; the envelope is then sealed with our key like any other. The
body is GitHub's payload as JSON (its bytes may differ from the original POST's: the
task is named after the guid in its own `recovered` namespace, which is what keeps two
overlapping runs from handing it off twice, a large body is stored under its own
key, and the worker's ledger dedupes by the delivery id).

The envelope's `received_at` is when GitHub first sent the delivery, not when the sweep
read it back: handlers order events by it (installations, shared/ledger/installations.py),
so a delivery recovered late still sorts before a later event the ingress took live.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from shared import tracing
from shared.clock import Clock
from shared.config import Config
from shared.github.hook_deliveries import DeliveryRequest
from shared.handoff.envelope import Envelope, EnvelopeSealer, select_headers
from shared.handoff.tasks import EnqueueResult, TaskQueue, task_id_for
from shared.handoff.to_worker import hand_to_worker


def recovered_task_id(guid: str) -> str:
    """The task of a recovered delivery: one per guid, whichever run hands it off."""
    return task_id_for("github", "recovered", guid)


def rehanded_task_id(guid: str) -> str:
    """The task of the one re-hand of a delivery the ledger never recorded: a name of its
    own, since Cloud Tasks refuses a task name for about an hour after its task ran."""
    return task_id_for("github", "recovered-again", guid)


@dataclass(frozen=True)
class Recovered:
    """What the sweep hands to the worker: GitHub's delivery `request`, when GitHub first
    sent it (`sent_at`, an aware datetime: the envelope's `received_at`), and the task to
    create (`task_id`, `recovered_task_id` or `rehanded_task_id` of the guid)."""

    request: DeliveryRequest
    sent_at: datetime
    task_id: str

    def __post_init__(self) -> None:
        guid = self.request.delivery.guid
        if not isinstance(self.sent_at, datetime) or self.sent_at.tzinfo is None:
            raise ValueError(f"recovered delivery {guid}: sent_at must be an aware datetime")
        if self.task_id not in (recovered_task_id(guid), rehanded_task_id(guid)):
            raise ValueError(
                f"recovered delivery {guid}: task {self.task_id[:80]!r} is not one of its own"
            )


HandOff = Callable[[Recovered], EnqueueResult]


class WorkerHandOff:
    """`hand_off(recovered)`: an envelope of GitHub's delivery, to the worker, as GitHub
    first sent it (module docstring)."""

    def __init__(
        self, config: Config, sealer: EnvelopeSealer, queue: Callable[[], TaskQueue], clock: Clock
    ) -> None:
        self._config = config
        self._sealer = sealer
        self._queue = queue
        self._clock = clock

    def __call__(self, recovered: Recovered) -> EnqueueResult:
        request = recovered.request
        kept = select_headers(request.headers)
        current = tracing.traceparent()
        if current is not None:  # the worker's run continues the sweep run's trace
            kept[tracing.TRACEPARENT] = current
        envelope = Envelope(
            source="github",
            event=request.delivery.event,
            delivery_id=request.delivery.guid,
            # Never after now: a GitHub clock ahead of ours must not sort it after a live one.
            received_at=min(recovered.sent_at, self._clock()),
            headers=kept,
            body=json.dumps(request.payload, separators=(",", ":")).encode(),
        )
        guid = request.delivery.guid
        # A large body is stored under its own key: the ingress may have stored the
        # original bytes under the guid's (a 503 after storing it), and these differ.
        return hand_to_worker(
            self._config,
            self._sealer,
            self._queue(),
            envelope,
            recovered.task_id,
            store_as=f"recovered:{guid}",
        )
