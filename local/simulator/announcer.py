"""Who hears of a finished job, and how: the targets of an event (a job's own webhook URIs,
else the `--webhook-url` and the registered webhooks that subscribe to it), and the
sending through the fault model (`webhook_drop_rate`, `webhook_copies`) and the
`Dispatcher` (webhooks.py). A part of `Simulator` (engine.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from local.simulator.injector import FaultInjector
from local.simulator.records import Batch, Operation
from local.simulator.state import World
from local.simulator.webhooks import Dispatcher, Message, Target

if TYPE_CHECKING:
    from local.simulator.engine import Settings

# A completion's `webhook` mode -> the copies it sends (0: nothing sent, nothing recorded).
WEBHOOK_MODES = {"send": 1, "duplicate": 2, "drop": 0}


@dataclass(frozen=True)
class Sent:
    """A webhook handed to the dispatcher and how many targets it goes to."""

    message: Message
    targets: int


class Announcer:
    """Sends Gemini's webhook events for `Simulator`, with its settings, world and faults."""

    def __init__(
        self, settings: Settings, world: World, faults: FaultInjector, dispatcher: Dispatcher
    ) -> None:
        self.settings = settings
        self.world = world
        self.faults = faults
        self.dispatcher = dispatcher

    def targets(self, event_type: str, job: Batch | Operation | None) -> list[Target]:
        """Per-job webhook URIs replace the project's webhooks, as in Gemini's dynamic webhooks."""
        secret = (self.settings.webhook_secret,)
        if job is not None and job.webhook_uris:
            return [Target(uri, secret) for uri in job.webhook_uris]
        targets = [Target(self.settings.webhook_url, secret)] if self.settings.webhook_url else []
        for registered in self.world.webhooks():
            live = self.world.live_secrets(registered)
            if (
                registered.state == "enabled"
                and event_type in registered.subscribed_events
                and live
            ):
                targets.append(Target(registered.uri, tuple(live), registered.id))
        return targets

    def announce(
        self, event_type: str, name: str, mode: str, job: Batch | Operation | None
    ) -> Sent | None:
        """Send the completion webhook per `mode` and the fault model; None if none went out.

        `drop` sends nothing and records nothing; a drop by `webhook_drop_rate` is
        recorded per target. `send` sends `webhook_copies` copies, `duplicate` two. The
        job's `webhook_config.user_metadata` goes in every event of that job (`data`), to
        its per-job URIs or, without any, to the registered webhooks.
        """
        if WEBHOOK_MODES[mode] == 0:
            return None
        copies = self.faults.draw_webhook(None if mode == "send" else WEBHOOK_MODES[mode])
        extra = None
        if job is not None and job.user_metadata is not None:
            extra = {"user_metadata": job.user_metadata}
        message = self.dispatcher.message(event_type, name, extra)
        targets = self.targets(event_type, job)
        if copies == 0:
            self.dispatcher.record_dropped(message, targets)
            return None
        self.dispatcher.dispatch(message, targets, copies)
        return Sent(message, len(targets))

    def ping(self, webhook_id: str) -> None:
        """Send a signed `webhook.ping` event to one registered webhook."""
        registered = self.world.webhook(webhook_id)
        message = self.dispatcher.message("webhook.ping", f"webhooks/{webhook_id}")
        live = tuple(self.world.live_secrets(registered))
        self.dispatcher.dispatch(message, [Target(registered.uri, live, registered.id)])
