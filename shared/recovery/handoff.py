"""A delivery read back from GitHub, handed to the worker the way the ingress hands one.

Why this is as trustworthy as a verified signature: the payload and headers come from
GitHub's API over TLS, in an answer to a request the sweep authenticated with the App's
own JWT (`GET /app/hook/deliveries/{id}`), so GitHub vouches for them exactly as its
HMAC does on a webhook; the envelope is then sealed with our key like any other. The
body is GitHub's payload as JSON (its bytes may differ from the original POST's: the
task is named after the guid in its own `recovered` namespace, which is what keeps two
overlapping runs from handing it off twice, a large body is claim-checked under its own
key, and the worker's ledger dedupes by the delivery id).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from shared import tracing
from shared.clock import Clock
from shared.config import Config
from shared.github.hook_deliveries import DeliveryRequest
from shared.handoff.envelope import Envelope, EnvelopeSealer, select_headers
from shared.handoff.tasks import EnqueueResult, TaskQueue, task_id_for
from shared.handoff.to_worker import hand_to_worker

HandOff = Callable[[DeliveryRequest], EnqueueResult]


def recovered_task_id(guid: str) -> str:
    """The task of a recovered delivery: one per guid, whichever run hands it off."""
    return task_id_for("github", "recovered", guid)


class WorkerHandOff:
    """`hand_off(request)`: an envelope of GitHub's delivery `request`, to the worker."""

    def __init__(
        self, config: Config, sealer: EnvelopeSealer, queue: Callable[[], TaskQueue], clock: Clock
    ) -> None:
        self._config = config
        self._sealer = sealer
        self._queue = queue
        self._clock = clock

    def __call__(self, request: DeliveryRequest) -> EnqueueResult:
        kept = select_headers(request.headers)
        current = tracing.traceparent()
        if current is not None:  # the worker's run continues the sweep run's trace
            kept[tracing.TRACEPARENT] = current
        envelope = Envelope(
            source="github",
            event=request.delivery.event,
            delivery_id=request.delivery.guid,
            received_at=self._clock(),
            headers=kept,
            body=json.dumps(request.payload, separators=(",", ":")).encode(),
        )
        guid = request.delivery.guid
        # A large body is claim-checked under its own key: the ingress may have stored the
        # original bytes under the guid's (a 503 after the claim), and these differ.
        return hand_to_worker(
            self._config,
            self._sealer,
            self._queue(),
            envelope,
            recovered_task_id(guid),
            claim_as=f"recovered:{guid}",
        )
